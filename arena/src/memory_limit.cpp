// The memory-limit check: the headroom left under the process's memory limit (a cgroup's, or one
// set by hand), read from the OS at most once per commit step and counted down by every step in
// between. It decides whether a step fits; it knows nothing of arenas or reservations.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>

#include "arena_internal.hpp"

namespace reservoir {
namespace {

constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max() / 2;

struct LimitState {
  std::atomic<std::size_t> setting{kMemoryLimitAuto};
  std::atomic<std::int64_t> headroom{kUnknown};  // what the last reading left, minus commits since
  std::atomic<std::int64_t> refresh_below{0};    // read again once the headroom is below this
  std::atomic<std::int64_t> read_at_ns{0};       // when the last reading was taken
  std::mutex mutex;                              // guards last
  pal::MemoryLimit last;                         // the last reading that found a limit
};

LimitState& limit_state() {
  static LimitState* const s = new LimitState;  // never destroyed, as the cache
  return *s;
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A fresh reading of the limit in force; false if there is none.
bool read_memory_limit(std::size_t setting, pal::MemoryLimit* m) {
  if (setting == kMemoryLimitAuto) return pal::memory_limit(m);
  m->limit = setting;
  m->usage = pal::current_rss();
  m->source = "reservoir::set_memory_limit";
  return true;
}

std::size_t limit_margin(std::size_t limit) noexcept {
  return std::max(limit / 32, std::size_t{8} << 20);
}

// Takes a reading and returns the headroom (limit - usage - margin, or kUnlimited).
std::int64_t refresh_headroom(LimitState& st, std::size_t setting) noexcept {
  pal::MemoryLimit m;
  bool limited = false;
  try {
    limited = read_memory_limit(setting, &m);
  } catch (...) {
    limited = false;
  }
  st.read_at_ns.store(now_ns(), std::memory_order_relaxed);
  if (!limited) {
    st.refresh_below.store(0, std::memory_order_relaxed);
    return kUnlimited;
  }
  const std::size_t margin = limit_margin(m.limit);
  const std::size_t avail = m.limit > m.usage + margin ? m.limit - m.usage - margin : 0;
  st.refresh_below.store(static_cast<std::int64_t>(m.limit / 4), std::memory_order_relaxed);
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
  return static_cast<std::int64_t>(std::min<std::size_t>(avail, kUnlimited - 1));
}

// The error a refused step reports: its own category, so the message can name the limit.
class MemoryLimitCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "reservoir.memory_limit"; }
  std::string message(int) const override {
    return "the step would cross the process's memory limit";
  }
};

}  // namespace

namespace detail {

bool memory_limit_allows(std::size_t len) noexcept {
  LimitState& st = limit_state();
  const std::size_t setting = st.setting.load(std::memory_order_relaxed);
  if (setting == kMemoryLimitOff) return true;
  const auto n = static_cast<std::int64_t>(std::min<std::size_t>(len, kUnlimited));
  const std::int64_t h = st.headroom.load(std::memory_order_relaxed);
  if (h != kUnknown) {
    const std::int64_t age = now_ns() - st.read_at_ns.load(std::memory_order_relaxed);
    const std::int64_t max_age = h >= kUnlimited / 2 ? 1'000'000'000 : 20'000'000;
    if (age < max_age && h - n > st.refresh_below.load(std::memory_order_relaxed)) {
      st.headroom.fetch_sub(n, std::memory_order_relaxed);
      return true;
    }
  }
  const std::int64_t fresh = refresh_headroom(st, setting);
  if (n > fresh) {
    st.headroom.store(fresh, std::memory_order_relaxed);
    return false;
  }
  st.headroom.store(fresh - n, std::memory_order_relaxed);
  return true;
}

const std::error_category& memory_limit_category() noexcept {
  static const MemoryLimitCategory c;
  return c;
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

}  // namespace detail

void set_memory_limit(std::size_t bytes) noexcept {
  LimitState& st = limit_state();
  st.setting.store(bytes, std::memory_order_relaxed);
  st.headroom.store(kUnknown, std::memory_order_relaxed);  // the next step reads afresh
}

std::size_t memory_limit_headroom() noexcept {
  LimitState& st = limit_state();
  const std::size_t setting = st.setting.load(std::memory_order_relaxed);
  if (setting == kMemoryLimitOff) return kMemoryLimitOff;
  const std::int64_t h = refresh_headroom(st, setting);
  st.headroom.store(h, std::memory_order_relaxed);
  return h >= kUnlimited ? kMemoryLimitOff : static_cast<std::size_t>(h);
}

}  // namespace reservoir
