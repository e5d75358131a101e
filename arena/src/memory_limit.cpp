// The memory-limit check: one process-wide headroom under the memory limit (a cgroup's, or one set
// by hand), from which every commit step takes its bytes before committing; and the check of a
// large step against what the machine can back. It knows nothing of arenas or reservations;
// the provider's fork handlers hold its locks across fork().
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>

#include "memory_limit.hpp"

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "bits.hpp"

namespace reservoir {
namespace {

constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max() / 2;

// Bytes given back to the OS (memory_released), ever; a headroom kept past a failed reading
// regains those released since the reading it is counted from.
std::atomic<std::size_t> g_released{0};

// headroom = limit - margin - usage at the last reading - bytes charged since, minus the bytes
// that were in flight (charged, not yet populated) at the reading. Steps take from it with a
// compare-and-swap that fails rather than go below the re-read threshold; readings are taken
// one at a time under `refresh`, and while one is taken the headroom reads kUnknown, so no step
// is charged against a figure about to be replaced.
struct LimitState {
  std::atomic<std::size_t> setting{kMemoryLimitAuto};
  std::atomic<std::int64_t> headroom{kUnknown};
  std::atomic<std::int64_t> refresh_below{0};  // read again once the headroom is below this
  std::atomic<std::int64_t> read_at_ns{0};     // when the last reading was taken
  std::atomic<std::int64_t> in_flight{0};      // charged bytes not yet populated
  std::atomic<std::size_t> released_seen{0};   // g_released as of the headroom's figure
  std::mutex refresh;                          // one reading at a time
  std::mutex mutex;                            // guards last
  pal::MemoryLimit last;                       // the last reading that found a limit
};

LimitState& limit_state() {
  static LimitState* const s = new LimitState;  // never destroyed, as the parked list
  return *s;
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A fresh reading of the limit in force; false if there is none. m->unreadable: the OS would not
// tell now (a limit set by hand: the resident set could not be read).
bool read_memory_limit(std::size_t setting, pal::MemoryLimit* m) {
  if (setting == kMemoryLimitAuto) return pal::memory_limit(m);
  m->limit = setting;
  m->usage = pal::current_rss();
  m->unreadable = m->usage == 0;
  m->source = "reservoir::set_memory_limit";
  return true;
}

// What the kernel counts beyond the bytes arenas commit: page tables, thread stacks, the
// allocator's own pages, and whatever the program allocates between two readings. 1/32 of the
// limit, at least 8 MiB, covers that with room to spare (docs/memory-limit.md has the figures).
std::size_t limit_margin(std::size_t limit) noexcept {
  return std::max(limit / 32, std::size_t{8} << 20);
}

std::int64_t clamp(std::size_t v) noexcept {
  return static_cast<std::int64_t>(std::min<std::size_t>(v, kUnlimited - 1));
}

// Takes a reading with `refresh` held and the headroom marked kUnknown; returns the headroom it
// leaves (kUnlimited if no limit applies) before `own` bytes of the caller's are charged.
// `previous` is the headroom the reading replaces (kUnknown if none): where the OS cannot tell
// now (a failed read, as when the process has no file descriptor left), a limit known before
// still stands, less what was charged since and plus what was released since, never "no limit".
std::int64_t take_reading(LimitState& st, std::size_t setting, std::int64_t own,
                          std::int64_t previous) noexcept {
  // In flight is read before the usage: a step populated in between is counted twice (on the
  // safe side), never not at all.
  const std::int64_t others = std::max<std::int64_t>(st.in_flight.load() - own, 0);
  pal::MemoryLimit m;
  bool limited = false;
  try {
    limited = read_memory_limit(setting, &m);
  } catch (...) {
    limited = false;
  }
  st.read_at_ns.store(now_ns(), std::memory_order_relaxed);
  if (m.unreadable && previous != kUnknown && previous < kUnlimited / 2) {
    const std::size_t released = g_released.load();
    const std::int64_t regained = clamp(released - st.released_seen.exchange(released));
    std::size_t limit = setting;
    if (setting == kMemoryLimitAuto) {
      std::lock_guard lock(st.mutex);
      limit = st.last.limit;
    }
    // Never more than the limit less the margin: the usage cannot go below nothing.
    const std::int64_t most = clamp(limit > limit_margin(limit) ? limit - limit_margin(limit) : 0);
    return std::min(previous + regained, std::max(most, previous));
  }
  // Counted after the reading: a release in between is in the reading or lost (the safe side),
  // never counted twice.
  st.released_seen.store(g_released.load());
  if (!limited) {
    st.refresh_below.store(0, std::memory_order_relaxed);
    return kUnlimited;
  }
  const std::size_t margin = limit_margin(m.limit);
  const std::size_t avail = m.limit > m.usage + margin ? m.limit - m.usage - margin : 0;
  st.refresh_below.store(clamp(m.limit / 4), std::memory_order_relaxed);
  {
    std::lock_guard lock(st.mutex);
    try {
      st.last = m;
    } catch (...) {
      st.last.source.clear();  // the message will lack the file name, nothing else
      st.last.limit = m.limit;
      st.last.usage = m.usage;
    }
  }
  return clamp(avail) - others;
}

// Adds `n` back to the headroom unless it is being re-read (the reading then sees the bytes).
void give_back(LimitState& st, std::int64_t n) noexcept {
  std::int64_t h = st.headroom.load();
  while (h != kUnknown && h < kUnlimited &&
         !st.headroom.compare_exchange_weak(h, std::min(h + n, kUnlimited - 1))) {
  }
}

// Takes n from a headroom that is known, recent and stays above the re-read threshold.
bool try_take(LimitState& st, std::int64_t n) noexcept {
  std::int64_t h = st.headroom.load();
  while (h != kUnknown) {
    const std::int64_t age = now_ns() - st.read_at_ns.load(std::memory_order_relaxed);
    const std::int64_t max_age = h >= kUnlimited / 2 ? 1'000'000'000 : 20'000'000;
    if (age >= max_age || h - n <= st.refresh_below.load(std::memory_order_relaxed)) return false;
    if (st.headroom.compare_exchange_weak(h, h - n)) return true;
  }
  return false;
}

// Made before main, for the reason the provider's state is (provider.cpp).
[[maybe_unused]] const bool g_made_before_main = (limit_state(), true);

using detail::kUnreadCommitBytes;

// The committed bytes of checked steps taken so far, up to kUnreadCommitBytes (where it stays:
// from there on every step is checked).
std::atomic<std::size_t> g_unread_commits{0};

// True if a step committing `len` bytes takes the sum past kUnreadCommitBytes (or it is past).
bool read_from(std::size_t len) noexcept {
  const std::size_t sum = g_unread_commits.load(std::memory_order_relaxed);
  return sum >= kUnreadCommitBytes || len > kUnreadCommitBytes - sum;
}

// Adds a step of `len` bytes to the sum; true if it is to be checked.
bool count_unread(std::size_t len) noexcept {
  std::size_t sum = g_unread_commits.load(std::memory_order_relaxed);
  while (sum < kUnreadCommitBytes) {
    const bool past = len > kUnreadCommitBytes - sum;
    if (g_unread_commits.compare_exchange_weak(sum, past ? kUnreadCommitBytes : sum + len,
                                               std::memory_order_relaxed)) {
      return past;
    }
  }
  return true;
}

}  // namespace

namespace detail {

bool memory_limit_charge(std::size_t populated, bool read, std::size_t* charged) noexcept {
  *charged = 0;
  LimitState& st = limit_state();
  const std::size_t setting = st.setting.load(std::memory_order_relaxed);
  if (setting == kMemoryLimitOff || populated == 0) return true;
  if (setting == kMemoryLimitAuto && !read) return true;
  const std::int64_t n = clamp(populated);
  // In flight first, then the compare-and-swap: a reading that replaces the headroom after this
  // charge took from it sees these bytes in flight.
  st.in_flight.fetch_add(n);
  if (try_take(st, n)) {
    *charged = static_cast<std::size_t>(n);
    return true;
  }
  std::lock_guard lock(st.refresh);
  if (try_take(st, n)) {  // another thread's reading, taken while this one waited
    *charged = static_cast<std::size_t>(n);
    return true;
  }
  const std::int64_t previous = st.headroom.exchange(kUnknown);
  const std::int64_t fresh = take_reading(st, setting, n, previous);
  if (n > fresh) {
    st.headroom.store(fresh);
    st.in_flight.fetch_sub(n);
    return false;
  }
  st.headroom.store(fresh >= kUnlimited / 2 ? fresh : fresh - n);
  *charged = static_cast<std::size_t>(n);
  return true;
}

bool memory_limit_in_force(std::size_t most) noexcept {
  LimitState& st = limit_state();
  const std::size_t setting = st.setting.load(std::memory_order_relaxed);
  if (setting == kMemoryLimitOff) return false;
  if (setting != kMemoryLimitAuto) return true;
  if (!read_from(most)) return false;
  const std::int64_t h = st.headroom.load();
  if (h == kUnknown) return memory_limit_headroom() != kMemoryLimitOff;
  return h < kUnlimited / 2;
}

void memory_limit_settle(std::size_t charged) noexcept {
  if (charged) limit_state().in_flight.fetch_sub(clamp(charged));
}

namespace {
void machine_give_back(std::int64_t n) noexcept;  // below, with the machine's headroom
}  // namespace

void memory_limit_refund(std::size_t charged, std::size_t backed) noexcept {
  if (backed != 0) machine_give_back(clamp(backed));
  if (charged == 0) return;
  LimitState& st = limit_state();
  give_back(st, clamp(charged));
  st.in_flight.fetch_sub(clamp(charged));
}

void memory_released(std::size_t bytes) noexcept {
  g_released.fetch_add(bytes, std::memory_order_relaxed);
}

std::string memory_limit_advice() {
  pal::MemoryLimit last;
  {
    LimitState& st = limit_state();
    std::lock_guard lock(st.mutex);
    last = st.last;
  }
  return "The memory limit is " + format_bytes(last.limit) + " (" + last.source + "), " +
         format_bytes(last.usage) + " are in use and " + format_bytes(limit_margin(last.limit)) +
         " are kept as a margin; raise the limit, use less, or turn the check off "
         "(ArenaOptions::respect_memory_limit, reservoir::set_memory_limit)";
}

// ---- what the machine can back ------------------------------------------------------------------

namespace {
// Steps below an eighth of the RAM are not checked against the RAM itself (they cost no read of
// /proc/meminfo); the RAM is read once. 0: not known yet; kMax: nothing is checked on this OS.
std::atomic<std::size_t> g_check_from{0};

// The machine's headroom: what it could still back (MemAvailable + SwapFree) less a margin at the
// last reading, less the bytes steps took since. Every step takes the bytes it will back from it
// with a compare-and-swap; a step that would take it below half of the last reading's figure, or
// one of at least kAgedStep when the reading is older than kMachineReadingAge, reads afresh (one
// reading at a time, under the memory limit's lock, which the fork handlers hold). A step that
// does not fit a fresh reading is refused: the process stops before the machine runs out, where
// the kernel's OOM killer would otherwise end it. kUnlimited: the OS does not tell.
std::atomic<std::int64_t> g_machine_headroom{kUnknown};
std::atomic<std::int64_t> g_machine_refresh_below{0};
std::atomic<std::int64_t> g_machine_read_at{0};
std::atomic<std::size_t> g_machine_released_seen{0};  // g_released as of the headroom's figure
// The last reading that succeeded (total 0: none yet), for the refusal's message. Guarded by the
// memory limit's `mutex`.
pal::MachineMemory g_machine_last;
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
  std::lock_guard lock(limit_state().mutex);
  g_machine_last = m;
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
  std::lock_guard lock(limit_state().refresh);
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
      std::lock_guard last(limit_state().mutex);
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
  g_machine_released_seen.store(g_released.load());  // after the reading, as take_reading's
  note_machine(m);
  const std::size_t can = m.available + m.swap_free;
  const std::size_t margin = machine_margin(m.total);
  const std::int64_t fresh = can > margin ? clamp(can - margin) : 0;
  g_machine_refresh_below.store(fresh / 2, std::memory_order_relaxed);
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
    pal::MachineMemory m;
    from = pal::machine_memory(&m) ? std::max<std::size_t>(m.total / 8, 1) : kMax;
    g_check_from.store(from, std::memory_order_relaxed);
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
    std::lock_guard lock(limit_state().mutex);
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

std::error_code charge_step(std::size_t committed, std::size_t populated, std::size_t backed,
                            std::size_t* charged) noexcept {
  *charged = 0;
  const bool read = count_unread(committed);
  if (read && !machine_can_back(committed, populated, backed)) {
    return make_error_code(Refusal::machine_memory);
  }
  if (!memory_limit_charge(populated, read, charged)) {
    if (read && backed != 0) machine_give_back(clamp(backed));  // what machine_can_back took
    return make_error_code(Refusal::memory_limit);
  }
  return {};
}

void memory_limit_lock_for_fork() noexcept {
  LimitState& st = limit_state();
  st.refresh.lock();
  st.mutex.lock();
}

void memory_limit_unlock_after_fork() noexcept {
  LimitState& st = limit_state();
  st.mutex.unlock();
  st.refresh.unlock();
}

}  // namespace detail

void set_memory_limit(std::size_t bytes) noexcept {
  LimitState& st = limit_state();
  st.setting.store(bytes, std::memory_order_relaxed);
  std::lock_guard lock(st.refresh);
  st.headroom.store(kUnknown);  // the next step reads afresh
}

std::size_t memory_limit_headroom() noexcept {
  LimitState& st = limit_state();
  const std::size_t setting = st.setting.load(std::memory_order_relaxed);
  if (setting == kMemoryLimitOff) return kMemoryLimitOff;
  std::lock_guard lock(st.refresh);
  const std::int64_t previous = st.headroom.exchange(kUnknown);
  const std::int64_t h = take_reading(st, setting, 0, previous);
  st.headroom.store(h);
  if (h >= kUnlimited / 2) return kMemoryLimitOff;
  return h > 0 ? static_cast<std::size_t>(h) : 0;
}

}  // namespace reservoir
