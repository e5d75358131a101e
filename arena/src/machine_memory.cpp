// What the machine can back: the check of a commit step against the machine's RAM and the
// headroom that every step past the first unread bytes takes from (MemAvailable + SwapFree less a
// margin), and the count of bytes given back to the OS that both headrooms (this one and the
// memory limit's) regain while their readings fail. It knows nothing of arenas or limits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>

#include "machine_memory.hpp"

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
// Bytes given back to the OS (memory_released), ever; a headroom kept past a failed reading
// regains those released since the reading it is counted from.
std::atomic<std::size_t> g_released{0};

// Steps below an eighth of the RAM are not checked against the RAM itself (they cost no read of
// /proc/meminfo); the RAM is read once. 0: not known yet; SIZE_MAX: nothing is checked here.
std::atomic<std::size_t> g_check_from{0};

// The machine's headroom: what it could still back (MemAvailable + SwapFree) less a margin at the
// last reading, less the bytes steps took since. Every step takes the bytes it will back from it
// with a compare-and-swap; a step that would take it below half of the last reading's figure, or
// one of at least kAgedStep when the reading is older than kMachineReadingAge, reads afresh (one
// reading at a time, under g_refresh, which the fork handlers hold). A step that
// does not fit a fresh reading is refused: the process stops before the machine runs out, where
// the kernel's OOM killer would otherwise end it. kUnlimited: the OS does not tell.
std::atomic<std::int64_t> g_machine_headroom{kUnknown};
std::atomic<std::int64_t> g_machine_refresh_below{0};
std::atomic<std::int64_t> g_machine_read_at{0};
std::atomic<std::size_t> g_machine_released_seen{0};  // g_released as of the headroom's figure
// The last reading that succeeded (total 0: none yet), for the refusal's message. Guarded by
// g_mutex.
pal::MachineMemory g_machine_last;
std::mutex g_refresh;                                     // one reading at a time
std::mutex g_mutex;                                       // guards g_machine_last
constexpr std::int64_t kMachineReadingAge = 100'000'000;  // 100 ms
constexpr std::int64_t kAgedStep = std::int64_t{1} << 20;

// Kept free for the kernel and every other process by steps larger than kPopulatedStepLimit: 1/32
// of the RAM, at least 64 MiB (all that smaller steps keep free) and at most 256 MiB. No more:
// where MemAvailable leaves out memory the kernel would reclaim (a file system's own cache, as
// ZFS's), a margin of a large machine's RAM would refuse arrays that std::vector grows.
constexpr std::size_t kLeastMachineMargin = std::size_t{64} << 20;
std::size_t machine_margin(std::size_t total) noexcept {
  return std::clamp(total / 32, kLeastMachineMargin, std::size_t{256} << 20);
}

void note_machine(const pal::MachineMemory& m) noexcept {
  std::lock_guard lock(g_mutex);
  g_machine_last = m;
}

// A reading just taken (g_refresh held): recorded for the messages and the refresh threshold set;
// returns the headroom it gives.
std::int64_t adopt_reading(const pal::MachineMemory& m) noexcept {
  g_machine_released_seen.store(g_released.load());  // after the reading, as take_reading's
  note_machine(m);
  const std::size_t can = m.available + m.swap_free;
  const std::size_t margin = machine_margin(m.total);
  const std::int64_t fresh = can > margin ? clamp(can - margin) : 0;
  g_machine_refresh_below.store(fresh / 2, std::memory_order_relaxed);
  return fresh;
}

// Takes n > 0 bytes from the machine's headroom; false if they do not fit a fresh reading.
bool machine_take(std::int64_t n) noexcept {
  std::int64_t h = g_machine_headroom.load();
  while (h != kUnknown) {
    const bool aged =
        n >= kAgedStep && now_ns() - g_machine_read_at.load(std::memory_order_relaxed) >=
                              (h >= kUnlimited / 2 ? 10 * kMachineReadingAge : kMachineReadingAge);
    if (aged) break;
    if (h >= kUnlimited / 2) return true;
    if (h - n <= g_machine_refresh_below.load(std::memory_order_relaxed)) break;
    if (g_machine_headroom.compare_exchange_weak(h, h - n)) return true;
  }
  std::lock_guard lock(g_refresh);
  pal::MachineMemory m;
  g_machine_read_at.store(now_ns(), std::memory_order_relaxed);
  if (!pal::machine_memory(&m)) {
    // A reading that fails where one succeeded before (no file descriptor left) keeps the last
    // figure, less what was taken since and plus what was released since (never more than the
    // RAM and swap less the margin); where none ever did, the OS does not tell.
    std::int64_t previous = g_machine_headroom.load();
    if (previous == kUnknown || previous >= kUnlimited / 2) {
      g_machine_headroom.store(kUnlimited);
      return true;
    }
    const std::size_t released = g_released.load();
    const std::int64_t regained = clamp(released - g_machine_released_seen.exchange(released));
    std::size_t most = 0;
    {
      std::lock_guard last(g_mutex);
      most = g_machine_last.total + g_machine_last.swap_total;
      const std::size_t margin = machine_margin(g_machine_last.total);
      most = most > margin ? most - margin : 0;
    }
    previous = std::min(previous + regained, std::max(clamp(most), previous));
    if (n > previous) {
      g_machine_headroom.store(previous);
      return false;
    }
    g_machine_headroom.store(previous - n);
    return true;
  }
  const std::int64_t fresh = adopt_reading(m);
  const std::size_t can = m.available + m.swap_free;
  if (n > fresh) {
    g_machine_headroom.store(fresh);
    // A small step keeps only the least margin free (MemAvailable already leaves out the
    // kernel's reserve): the full margin is for large steps, and would stop every array where
    // MemAvailable undercounts while std::vector still grows. Each such step reads the machine
    // afresh (the headroom stays below the threshold).
    return n <= static_cast<std::int64_t>(kPopulatedStepLimit) &&
           static_cast<std::size_t>(n) + kLeastMachineMargin <= can;
  }
  g_machine_headroom.store(fresh - n);
  return true;
}
}  // namespace

// The check of the step against the RAM (large steps), then the take from the headroom: a step
// the first refuses has taken nothing.
bool machine_can_back(std::size_t committed, std::size_t populated, std::size_t backed) noexcept {
  std::size_t from = g_check_from.load(std::memory_order_relaxed);
  if (from == 0) {
    // The process's first checked step: one reading gives the RAM and the first headroom.
    pal::MachineMemory m;
    const bool read = pal::machine_memory(&m);
    from = read ? std::max<std::size_t>(m.total / 8, 1) : std::numeric_limits<std::size_t>::max();
    g_check_from.store(from, std::memory_order_relaxed);
    if (read) {
      std::lock_guard lock(g_refresh);
      if (g_machine_headroom.load() == kUnknown) {
        g_machine_read_at.store(now_ns(), std::memory_order_relaxed);
        g_machine_headroom.store(adopt_reading(m));
      }
    }
  }
  if (pal::MachineMemory m; committed >= from && pal::machine_memory(&m)) {
    note_machine(m);
    // Under the heuristic overcommit (0) the kernel refuses a single allocation larger than RAM
    // plus swap (std::vector's malloc meets exactly that); under strict overcommit (2) the commit
    // call itself is refused. Populated bytes must fit in what is free now, in every mode.
    if (m.overcommit == 0 && committed > m.total + m.swap_total) return false;
    if (populated > m.available + m.swap_free) return false;
  }
  return backed == 0 || machine_take(clamp(backed));
}

std::string machine_memory_advice() {
  pal::MachineMemory m;
  {
    std::lock_guard lock(g_mutex);
    m = g_machine_last;
  }
  return "At the last reading the machine had " + format_bytes(m.total) + " of RAM (" +
         format_bytes(m.available) + " available) and " + format_bytes(m.swap_total) +
         " of swap (" + format_bytes(m.swap_free) + " free), " +
         format_bytes(machine_margin(m.total)) + " of it kept free from steps larger than " +
         format_bytes(kPopulatedStepLimit) + " (" + format_bytes(kLeastMachineMargin) +
         " from smaller ones)" +
         "; use less, add swap, or turn the check off (ArenaOptions::respect_memory_limit)";
}

// Gives bytes taken for a step that was not backed back to the headroom. A reading taken in
// between already counted them as free (the machine's headroom, unlike the limit's, counts no
// bytes in flight): then they count twice until the next reading, by at most that one step.
void machine_give_back(std::int64_t n) noexcept {
  std::int64_t h = g_machine_headroom.load();
  while (h != kUnknown && h < kUnlimited / 2 &&
         !g_machine_headroom.compare_exchange_weak(h, h + n)) {
  }
}

void memory_released(std::size_t bytes) noexcept {
  g_released.fetch_add(bytes, std::memory_order_relaxed);
}

std::size_t released_total() noexcept {
  return g_released.load();
}

void machine_lock_for_fork() noexcept {
  g_refresh.lock();
  g_mutex.lock();
}

void machine_unlock_after_fork() noexcept {
  g_mutex.unlock();
  g_refresh.unlock();
}

}  // namespace reservoir::detail
