// The memory-limit check: one process-wide headroom under the memory limit (a cgroup's, or one set
// by hand), from which every commit step takes its bytes before committing, after the machine's
// check (machine_memory.cpp). It knows nothing of arenas or reservations; the provider's fork
// handlers hold its locks across fork().
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>

#include "memory_limit.hpp"

#include <reservoir/arena.hpp>
#include <reservoir/pal.hpp>

#include "bits.hpp"

namespace reservoir {
namespace {

using detail::clamp;
using detail::kUnknown;
using detail::kUnlimited;
using detail::now_ns;

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
  // Never destroyed, as the parked list, and in static storage as it is.
  alignas(LimitState) static std::byte storage[sizeof(LimitState)];
  static LimitState* const s = ::new (storage) LimitState;
  return *s;
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
  return std::max(limit / 32, detail::kLeastLimitMargin);
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
    const std::size_t released = detail::released_total();
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
  st.released_seen.store(detail::released_total());
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

void memory_limit_refund(std::size_t charged, std::size_t backed) noexcept {
  if (backed != 0) machine_give_back(clamp(backed));
  if (charged == 0) return;
  LimitState& st = limit_state();
  give_back(st, clamp(charged));
  st.in_flight.fetch_sub(clamp(charged));
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
  machine_lock_for_fork();
}

void memory_limit_unlock_after_fork() noexcept {
  machine_unlock_after_fork();
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
