// Arena: one reservation, a length, and a committed prefix grown in granule-sized steps.
#include <reservoir/arena.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace reservoir {
namespace {

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// The largest reservation we ask for: the user half of a 48-bit address space (128 TiB) on 64-bit
// systems, 2 GiB on 32-bit ones. Anything larger cannot succeed, so it is a length_error up front.
constexpr std::size_t kMaxReservation =
    sizeof(void*) >= 8 ? (std::size_t{1} << 47) : (std::size_t{1} << 31);

// round_up for a power-of-two-free `unit`; false on overflow. A unit of 0 (an empty arena's
// granule) leaves the value as it is.
bool round_up(std::size_t value, std::size_t unit, std::size_t* out) noexcept {
  if (unit == 0) {
    *out = value;
    return true;
  }
  const std::size_t rem = value % unit;
  if (rem == 0) {
    *out = value;
    return true;
  }
  if (value > kMax - (unit - rem)) return false;
  *out = value + (unit - rem);
  return true;
}

std::string hex_address(const void* p) {
  char buf[32];  // "%p" prints no 0x on Windows
  std::snprintf(buf, sizeof(buf), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return buf;
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Everything the constructor decides before it calls the OS.
struct Layout {
  std::size_t granule = 0;
  std::size_t max_step = 0;
  std::size_t guard = 0;
  std::size_t usable = 0;
  std::size_t base_align = 0;  // base_ is a multiple of this
  std::size_t mapping = 0;
};

// Validates the request; returns an errc describing a bad request, or {} with *out filled.
std::errc plan(std::size_t max_bytes, const ArenaOptions& options, Layout* out) noexcept {
  const std::size_t page = pal::page_size();
  const std::size_t granularity = pal::allocation_granularity();
  if (max_bytes == 0) return std::errc::invalid_argument;
  Layout l;
  if (!round_up(options.commit_granule == 0 ? std::max(kDefaultCommitGranule, page)
                                            : options.commit_granule,
                page, &l.granule)) {
    return std::errc::invalid_argument;
  }
  if (!round_up(options.max_commit_step == 0 ? kDefaultMaxCommitStep : options.max_commit_step,
                page, &l.max_step)) {
    return std::errc::invalid_argument;
  }
  // Every step is a whole number of granules, so committed() always is one too (up to the
  // reservation's end) and trimming to a granule boundary can restore any earlier length exactly.
  if (!round_up(std::max(l.max_step, l.granule), l.granule, &l.max_step)) {
    return std::errc::invalid_argument;
  }
  l.guard = options.guard_pages ? page : 0;
  if (max_bytes > kMaxReservation || !round_up(max_bytes, page, &l.usable)) {
    return std::errc::value_too_large;
  }
  // Large arenas whose steps reach 2 MiB start on a 2 MiB boundary, so every later step is a
  // whole aligned huge page. The alignment costs address space only (never committed).
  l.base_align = l.usable >= 2 * kHugePage && l.max_step >= kHugePage ? kHugePage : page;
  const std::size_t slack = l.base_align > granularity ? l.base_align : 0;
  if (!round_up(slack + l.usable + 2 * l.guard, granularity, &l.mapping) ||
      l.mapping > kMaxReservation) {
    return std::errc::value_too_large;
  }
  *out = l;
  return {};
}

// ---- address-space accounting -------------------------------------------------------------------

std::atomic<std::size_t> g_reserved{0};  // bytes reserved by live arenas and parked reservations
std::atomic<std::size_t> g_budget{0};    // set by hand; 0: automatic

std::error_code reserve_mapping(std::size_t size, void** out) noexcept {
  std::error_code ec = pal::reserve(size, out);
  if (!ec) g_reserved.fetch_add(size, std::memory_order_relaxed);
  return ec;
}

// A refused release only leaks address space; nobody can be told (destructors), so the bytes are
// no longer counted either way.
void release_mapping(void* mapping, std::size_t size) noexcept {
  (void)pal::release(mapping, size);
  g_reserved.fetch_sub(size, std::memory_order_relaxed);
}

// ---- memory limits ------------------------------------------------------------------------------

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

// True if committing `len` more bytes keeps the process within its memory limit (minus the
// margin); counts the bytes against the current reading.
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

// The error a refused step reports: its own category, so the message can name the limit.
class MemoryLimitCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "reservoir.memory_limit"; }
  std::string message(int) const override {
    return "the step would cross the process's memory limit";
  }
};
const std::error_category& memory_limit_category() noexcept {
  static const MemoryLimitCategory c;
  return c;
}

// ---- the reservation cache ----------------------------------------------------------------------

struct Parked {
  void* mapping;
  std::size_t mapping_size;
  std::byte* base;
  std::size_t reserved;
  std::size_t committed;  // kept committed: whole granules (see Arena::park_in_cache)
  ArenaOptions options;
};

constexpr std::size_t kCacheMaxCommitted = std::size_t{1} << 20;

struct ThreadSlot;

// Everything parked, in per-thread slots and in the shared list, counts toward one limit of
// `limit` reservations and kCacheMaxCommitted committed bytes. The counters are claimed before a
// reservation is parked and given back when it leaves, so the limits hold at every moment.
struct ReservationCache {
  std::mutex mutex;
  std::vector<Parked> entries;  // guarded by mutex
  ThreadSlot* slots = nullptr;  // every live thread's slot (intrusive list), guarded by mutex
  std::atomic<std::size_t> limit{16};     // 0: the cache is off
  std::atomic<std::size_t> count{0};      // parked reservations, slots and entries
  std::atomic<std::size_t> committed{0};  // their committed bytes
  std::atomic<std::size_t> retired{0};    // at least the slots of ended threads not yet reaped

  // Claims room for one more parked reservation of `bytes` committed; false if it does not fit.
  bool claim(std::size_t bytes) noexcept {
    std::size_t n = count.load(std::memory_order_relaxed);
    do {
      if (n >= limit.load(std::memory_order_relaxed)) return false;
    } while (!count.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    if (committed.fetch_add(bytes, std::memory_order_relaxed) + bytes > kCacheMaxCommitted) {
      unclaim(bytes);
      return false;
    }
    return true;
  }
  void unclaim(std::size_t bytes) noexcept {
    committed.fetch_sub(bytes, std::memory_order_relaxed);
    count.fetch_sub(1, std::memory_order_relaxed);
  }
};

ReservationCache& cache() {
  // Never destroyed: an arena in a static object may be destroyed after any function-local static
  // and must still find the cache. What it holds at exit goes back with the process.
  static ReservationCache* const c = new ReservationCache;
  return *c;
}

// The per-thread part: one slot per thread, reached without the shared mutex, so a thread that
// creates and destroys arrays in a loop reuses one reservation cheaply. A slot is heap memory that
// a pal thread key leads to, not a thread_local object: MinGW-w64 GCC frees a thread's
// thread_local storage before it runs the destructors of the objects in it (see pal.hpp), so a
// thread_local slot would be emptied and unlinked after it was freed, and another thread's
// allocation could land in the middle of the registry. `busy` keeps the owner and a thread emptying
// the slot (take_all, reap_retired) apart; only the latter ever waits.
struct ThreadSlot {
  std::atomic_flag busy;             // clear from construction (C++20)
  std::atomic<bool> retired{false};  // its thread has ended; the next reap frees it
  std::optional<Parked> parked;
  ThreadSlot* prev = nullptr;  // the registry, guarded by the cache's mutex
  ThreadSlot* next = nullptr;

  void lock() noexcept {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() noexcept { busy.clear(std::memory_order_release); }

  std::optional<Parked> take() noexcept {
    lock();
    std::optional<Parked> p = std::exchange(parked, std::nullopt);
    unlock();
    return p;
  }
};

// Runs at the end of a thread that has a slot (the key's exit function). It takes no lock: on
// Windows it may run while the process exits, after the other threads were stopped holding
// whatever they held, and Wine runs it holding a lock every starting and ending thread takes. The
// slot keeps its parked reservation (still counted) until the next reap. The count goes up first,
// so it never reads 0 while a retired slot waits.
void retire_slot(void* p) noexcept {
  cache().retired.fetch_add(1, std::memory_order_relaxed);
  static_cast<ThreadSlot*>(p)->retired.store(true, std::memory_order_release);
}

// Unlinks and frees the slots of ended threads; their parked reservations move to the shared
// list (they stay counted) or, if the list cannot take them, back to the OS. Called with the
// mutex held, so no take_all is emptying these slots at the same time.
void reap_retired(ReservationCache& c) noexcept {
  if (c.retired.load(std::memory_order_relaxed) == 0) return;
  for (ThreadSlot* s = c.slots; s;) {
    ThreadSlot* const next = s->next;
    if (s->retired.load(std::memory_order_acquire)) {
      if (s->prev)
        s->prev->next = next;
      else
        c.slots = next;
      if (next) next->prev = s->prev;
      c.retired.fetch_sub(1, std::memory_order_relaxed);
      if (std::optional<Parked> p = s->take()) {
        try {
          c.entries.push_back(*p);
        } catch (...) {
          // no memory for the list's own bookkeeping: release instead
          c.unclaim(p->committed);
          release_mapping(p->mapping, p->mapping_size);
        }
      }
      delete s;
    }
    s = next;
  }
}

// The key that leads each thread to its slot; ok is false if the OS gave none, and then every
// thread uses the shared list.
struct SlotKey {
  pal::ThreadKey key;
  bool ok = false;
};
const SlotKey& slot_key() noexcept {
  static const SlotKey k = [] {
    SlotKey r;
    r.ok = !pal::create_thread_key(&retire_slot, &r.key);
    return r;
  }();
  return k;
}

// This thread's slot, made if `create` and there is none. nullptr without one: before the
// thread's first take_parked, once its slot is retired during thread exit, or if the OS or the
// heap refused. Only take_parked creates, so arenas destroyed during thread exit after the slot
// was retired park in the shared list instead of making a slot that would never be retired.
ThreadSlot* my_slot(bool create) noexcept {
  const SlotKey& k = slot_key();
  if (!k.ok) return nullptr;
  auto* slot = static_cast<ThreadSlot*>(pal::thread_value(k.key));
  if (slot != nullptr || !create) return slot;
  slot = new (std::nothrow) ThreadSlot;
  if (slot == nullptr) return nullptr;
  if (pal::set_thread_value(k.key, slot)) {
    delete slot;
    return nullptr;
  }
  ReservationCache& c = cache();
  std::lock_guard lock(c.mutex);
  reap_retired(c);  // so the registry holds the live threads and those ended since the last reap
  slot->next = c.slots;
  if (slot->next) slot->next->prev = slot;
  c.slots = slot;
  return slot;
}

std::optional<Parked> take_parked(std::size_t mapping_size, const ArenaOptions& options) noexcept {
  ReservationCache& c = cache();
  ThreadSlot* const slot = my_slot(c.limit.load(std::memory_order_relaxed) != 0);
  if (c.count.load(std::memory_order_relaxed) == 0) return std::nullopt;
  if (slot != nullptr) {
    slot->lock();
    if (slot->parked && slot->parked->mapping_size == mapping_size &&
        slot->parked->options == options) {
      Parked p = *slot->parked;
      slot->parked.reset();
      slot->unlock();
      c.unclaim(p.committed);
      return p;
    }
    slot->unlock();
  }
  std::lock_guard lock(c.mutex);
  reap_retired(c);
  for (std::size_t i = c.entries.size(); i-- > 0;) {
    if (c.entries[i].mapping_size == mapping_size && c.entries[i].options == options) {
      Parked p = c.entries[i];
      c.entries[i] = c.entries.back();
      c.entries.pop_back();
      c.unclaim(p.committed);
      return p;
    }
  }
  return std::nullopt;
}

// Parks p in this thread's slot or the shared list; false if the limits are reached (or the
// cache is off), and then the caller releases it.
bool park(const Parked& p) noexcept {
  ReservationCache& c = cache();
  if (!c.claim(p.committed)) return false;
  if (ThreadSlot* slot = my_slot(false)) {
    slot->lock();
    if (!slot->parked) {
      slot->parked = p;
      slot->unlock();
      return true;
    }
    slot->unlock();
  }
  std::lock_guard lock(c.mutex);
  try {
    c.entries.push_back(p);
  } catch (...) {
    c.unclaim(p.committed);
    return false;  // no memory for the cache's own bookkeeping: release instead
  }
  return true;
}

// Takes every parked reservation out of the cache (the shared list and every thread's slot).
std::vector<Parked> take_all() noexcept {
  ReservationCache& c = cache();
  std::vector<Parked> gone;
  std::lock_guard lock(c.mutex);
  reap_retired(c);
  gone.swap(c.entries);
  for (ThreadSlot* s = c.slots; s; s = s->next) {
    if (std::optional<Parked> p = s->take()) {
      try {
        gone.push_back(*p);
      } catch (...) {
        c.unclaim(p->committed);
        release_mapping(p->mapping, p->mapping_size);
      }
    }
  }
  for (const Parked& p : gone)
    c.unclaim(p.committed);
  return gone;
}

[[noreturn]] void throw_plan_error(std::errc e, std::size_t max_bytes) {
  if (e == std::errc::invalid_argument) {
    throw std::invalid_argument(
        max_bytes == 0 ? "reservoir::Arena: max_bytes must be greater than 0"
                       : "reservoir::Arena: commit_granule or max_commit_step is too large to "
                         "round up to whole pages and granules");
  }
  throw std::length_error("reservoir::Arena: cannot reserve " + format_bytes(max_bytes) +
                          ": more than the address space can hold (limit " +
                          format_bytes(kMaxReservation) + ")");
}

}  // namespace

// ---- errors -------------------------------------------------------------------------------------

std::string format_bytes(std::size_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[48];
  if (unit == 0 || value == static_cast<double>(static_cast<std::uint64_t>(value))) {
    std::snprintf(buf, sizeof(buf), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error)
    : error_(error) {
  message_ = std::string("cannot ") + operation + " " + format_bytes(bytes);
  message_ += address ? " at " + hex_address(address) : std::string(" of address space");
  message_ += ": " + pal::describe(error);
}

OsAllocationError::OsAllocationError(const char* operation, std::size_t bytes, const void* address,
                                     std::error_code error, const std::string& advice)
    : OsAllocationError(operation, bytes, address, error) {
  message_ += ". " + advice;
}

// ---- lifetime -----------------------------------------------------------------------------------

Arena::Arena(std::size_t max_bytes, ArenaOptions options) : options_(options) {
  std::error_code ec;
  std::optional<Arena> made = create(max_bytes, options, &ec);
  if (!made) {
    Layout l;
    if (std::errc e = plan(max_bytes, options, &l); e != std::errc{})
      throw_plan_error(e, max_bytes);
    throw OsAllocationError("reserve", l.mapping, nullptr, ec);
  }
  swap(*this, *made);
}

std::optional<Arena> Arena::create(std::size_t max_bytes, ArenaOptions options,
                                   std::error_code* error) noexcept {
  // 1. Validate and lay out: [guard page][usable ... rounded to granularity][guard page].
  Layout l;
  if (std::errc e = plan(max_bytes, options, &l); e != std::errc{}) {
    *error = std::make_error_code(e);
    return std::nullopt;
  }
  // 2. A parked reservation of the same layout and options costs no system call.
  if (options.reuse_reservation) {
    if (std::optional<Parked> p = take_parked(l.mapping, options)) {
      Arena a;
      a.mapping_ = p->mapping;
      a.mapping_size_ = p->mapping_size;
      a.base_ = p->base;
      a.reserved_ = p->reserved;
      a.committed_ = p->committed;
      a.granule_ = l.granule;
      a.max_step_ = l.max_step;
      a.options_ = options;
      *error = {};
      return a;
    }
  }
  // 3. Reserve address space only.
  void* mapping = nullptr;
  if (std::error_code ec = reserve_mapping(l.mapping, &mapping)) {
    *error = ec;
    return std::nullopt;
  }
  // 4. Huge pages are a hint: a kernel without THP refuses it and the arena works the same.
  if (options.huge_pages) (void)pal::advise_huge_pages(mapping, l.mapping);
  Arena a;
  a.mapping_ = mapping;
  a.mapping_size_ = l.mapping;
  const auto start = reinterpret_cast<std::uintptr_t>(mapping) + l.guard;
  const std::uintptr_t aligned = (start + l.base_align - 1) / l.base_align * l.base_align;
  a.base_ =
      static_cast<std::byte*>(mapping) + (aligned - reinterpret_cast<std::uintptr_t>(mapping));
  a.reserved_ =
      static_cast<std::size_t>(static_cast<std::byte*>(mapping) + l.mapping - l.guard - a.base_);
  a.granule_ = l.granule;
  a.max_step_ = l.max_step;
  a.options_ = options;
  *error = {};
  return a;
}

Arena::Arena(Arena&& other) noexcept {
  swap(*this, other);
}

Arena& Arena::operator=(Arena&& other) noexcept {
  // Take other's reservation before releasing ours: other may live inside our own memory (an
  // object stored in the arena it is assigned to), so releasing first would free it.
  Arena taken(std::move(other));
  swap(*this, taken);
  return *this;  // `taken` releases what *this held
}

Arena::~Arena() {
  release_all();
}

bool Arena::park_in_cache() noexcept {
  // Keep up to kDoublingStepLimit committed (whole granules, at least one; no more than one
  // max_commit_step, so fixed small steps stay small): the next arena then reaches that size with
  // no commit call and no page fault. A refused decommit means: do not park.
  const std::size_t keep_limit =
      std::max(granule_, std::min(kDoublingStepLimit, max_step_) / granule_ * granule_);
  if (!options_.reuse_reservation || keep_limit > kCacheMaxCommitted) return false;
  const std::size_t keep = std::min(committed_, keep_limit);
  if (committed_ > keep && pal::decommit(base_ + keep, committed_ - keep)) return false;
  committed_ = keep;
  return park(Parked{mapping_, mapping_size_, base_, reserved_, keep, options_});
}

void Arena::release_all() noexcept {
  if (mapping_ != nullptr && !park_in_cache()) {
    // A refused release only leaks address space; a destructor has no one to tell, and the
    // object is gone either way. (Fault-injection tests count these calls.)
    release_mapping(mapping_, mapping_size_);
  }
  base_ = nullptr;
  mapping_ = nullptr;
  size_ = committed_ = reserved_ = granule_ = max_step_ = mapping_size_ = 0;
}

void set_reservation_cache_limit(std::size_t entries) noexcept {
  cache().limit.store(entries, std::memory_order_relaxed);
  if (entries == 0) clear_reservation_cache();
}

void clear_reservation_cache() noexcept {
  for (const Parked& p : take_all())
    release_mapping(p.mapping, p.mapping_size);
}

std::size_t reservation_cache_size() noexcept {
  return cache().count.load(std::memory_order_relaxed);
}

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

std::size_t reserved_address_space() noexcept {
  return g_reserved.load(std::memory_order_relaxed);
}

std::size_t address_space_budget() noexcept {
  const std::size_t set = g_budget.load(std::memory_order_relaxed);
  return set ? set : pal::address_space_size() / 2;
}

void set_address_space_budget(std::size_t bytes) noexcept {
  g_budget.store(bytes, std::memory_order_relaxed);
}

std::size_t default_reservation_size(std::size_t preferred) noexcept {
  constexpr std::size_t kSmall = std::size_t{1} << 30;
  constexpr std::size_t kTiny = std::size_t{64} << 20;
  const std::size_t budget = address_space_budget();
  const std::size_t used = reserved_address_space();
  if (used <= budget / 4 && preferred <= budget / 4 - used) return preferred;
  if (used <= budget && std::min(preferred, kSmall) <= budget - used) {
    return std::min(preferred, kSmall);
  }
  return std::min(preferred, kTiny);
}

void swap(Arena& a, Arena& b) noexcept {
  using std::swap;
  swap(a.base_, b.base_);
  swap(a.size_, b.size_);
  swap(a.committed_, b.committed_);
  swap(a.reserved_, b.reserved_);
  swap(a.granule_, b.granule_);
  swap(a.max_step_, b.max_step_);
  swap(a.mapping_, b.mapping_);
  swap(a.mapping_size_, b.mapping_size_);
  swap(a.options_, b.options_);
}

// ---- committing ---------------------------------------------------------------------------------

std::size_t Arena::commit_step() const noexcept {
  // A power-of-two number of granules, capped (the cap is a whole number of granules):
  //   1. at least one granule;
  //   2. the committed prefix itself, up to kDoublingStepLimit: small arenas double;
  //   3. committed/8: large arenas commit in proportion to their size.
  // An empty (default-constructed or moved-from) arena has no granule and no step.
  if (granule_ == 0) return 0;
  std::size_t step = granule_;
  if (const std::size_t held = committed_ / granule_; held > 1) {
    const std::size_t doubling_cap = std::max<std::size_t>(kDoublingStepLimit / granule_, 1);
    step = std::max(step, granule_ * std::bit_floor(std::min(held, doubling_cap)));
  }
  if (const std::size_t eighth = committed_ / 8 / granule_; eighth > 1) {
    step = std::max(step, granule_ * std::bit_floor(eighth));
  }
  return std::min(step, max_step_);
}

std::size_t Arena::commit_target(std::size_t bytes) const noexcept {
  // Commit outward: whole steps, capped at the reservation's end.
  std::size_t target = reserved_;
  if (std::size_t r; round_up(bytes, commit_step(), &r) && r < reserved_) target = r;
  return target;
}

std::error_code Arena::commit_to(std::size_t bytes, Populate populate) noexcept {
  const std::size_t target = commit_target(bytes);
  if (target <= committed_) return {};
  std::byte* start = base_ + committed_;
  const std::size_t len = target - committed_;
  if (options_.respect_memory_limit && !memory_limit_allows(len)) {
    return {1, memory_limit_category()};
  }
  if (std::error_code ec = pal::commit(start, len)) return ec;
  if (options_.prefault && populate != Populate::none) {
    // 1. Ask the OS to back the step (Linux MADV_POPULATE_WRITE), then 2. write one byte per
    //    page anyway (the only way elsewhere). After a populate the write costs a store per page,
    //    but on a VM whose host takes back free guest pages (free page reporting) the populate
    //    maps pages without touching them, and the host's fault would otherwise land on the
    //    append that first writes each page (measurements: docs/design.md).
    //    Storing 0 is safe: the step was never committed or was decommitted, so it holds no live
    //    data and reads as zero (a read-modify-write would cost a second fault per page where
    //    nothing was populated: a read maps the shared zero page first).
    //    With Populate::first_step only the first max_step_ bytes are backed; the rest is
    //    committed and backed on first touch.
    const std::size_t backed = populate == Populate::all ? len : std::min(len, max_step_);
    std::error_code ec = pal::prefault(start, backed);
    if (!ec || ec == std::errc::not_supported) {
      // Every 4 KiB, the smallest page of any supported OS, whatever page_size() says: a store
      // per page on 4 KiB systems, a few redundant ones per page elsewhere.
      constexpr std::size_t kTouchStride = 4096;
      auto* first = static_cast<volatile unsigned char*>(static_cast<void*>(start));
      for (std::size_t off = 0; off < backed; off += kTouchStride)
        first[off] = 0;
    } else {
      // The OS cannot back the step now (MADV_POPULATE_WRITE says ENOMEM): report it here as a
      // clean error rather than let the first touch meet the OOM killer. Undo the commit.
      (void)pal::decommit(start, len);
      return ec;
    }
  }
  committed_ = target;
  return {};
}

void Arena::throw_growth_error(std::size_t bytes, std::error_code ec) const {
  if (!ec) {
    throw std::length_error("reservoir::Arena: cannot grow to " + format_bytes(bytes) +
                            ": the reservation holds " + format_bytes(reserved_));
  }
  if (ec.category() == memory_limit_category()) {
    pal::MemoryLimit last;
    {
      LimitState& st = limit_state();
      std::lock_guard lock(st.mutex);
      last = st.last;
    }
    throw OsAllocationError(
        "commit", commit_target(bytes) - committed_, base_ + committed_, ec,
        "The memory limit is " + format_bytes(last.limit) + " (" + last.source + "), " +
            format_bytes(last.usage) + " are in use and " + format_bytes(limit_margin(last.limit)) +
            " are kept as a margin; raise the limit, use less, or turn the check off "
            "(ArenaOptions::respect_memory_limit, reservoir::set_memory_limit)");
  }
  throw OsAllocationError("commit", commit_target(bytes) - committed_, base_ + committed_, ec);
}

void* Arena::grow_slow(std::size_t n) {
  if (n > reserved_ - size_) {
    throw_growth_error(n > kMax - size_ ? kMax : size_ + n, {});
  }
  if (std::error_code ec = commit_to(size_ + n)) throw_growth_error(size_ + n, ec);
  std::byte* p = base_ + size_;
  size_ += n;
  return p;
}

void* Arena::try_grow_slow(std::size_t n) noexcept {
  if (n > reserved_ - size_) return nullptr;
  if (commit_to(size_ + n)) return nullptr;
  std::byte* p = base_ + size_;
  size_ += n;
  return p;
}

namespace {
bool valid_alignment(std::size_t alignment) noexcept {
  return alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= pal::page_size();
}
std::size_t padding_for(const std::byte* end, std::size_t alignment) noexcept {
  return static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(end)) & (alignment - 1);
}
}  // namespace

void* Arena::allocate(std::size_t n, std::size_t alignment) {
  if (!valid_alignment(alignment)) {
    throw std::invalid_argument("reservoir::Arena::allocate: alignment " +
                                std::to_string(alignment) +
                                " is not a power of two no larger than the page size");
  }
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) throw_growth_error(kMax, {});
  return static_cast<std::byte*>(grow(pad + n)) + pad;
}

void* Arena::try_allocate(std::size_t n, std::size_t alignment) noexcept {
  if (!valid_alignment(alignment)) return nullptr;
  const std::size_t pad = padding_for(base_ + size_, alignment);
  if (n > kMax - pad) return nullptr;
  void* p = try_grow(pad + n);
  return p ? static_cast<std::byte*>(p) + pad : nullptr;
}

void Arena::reserve(std::size_t bytes, Populate populate) {
  if (bytes > reserved_) throw_growth_error(bytes, {});
  if (std::error_code ec = commit_to(bytes, populate)) throw_growth_error(bytes, ec);
}

bool Arena::try_reserve(std::size_t bytes, Populate populate) noexcept {
  return bytes <= reserved_ && !commit_to(bytes, populate);
}

// ---- shrinking ----------------------------------------------------------------------------------

std::error_code Arena::shrink(std::size_t new_size) {
  if (new_size > size_) {
    throw std::invalid_argument("reservoir::Arena::shrink: new size " + std::to_string(new_size) +
                                " exceeds the current size " + std::to_string(size_));
  }
  size_ = new_size;
  return trim();
}

void Arena::rewind(std::size_t mark) {
  if (mark > size_) {
    throw std::invalid_argument("reservoir::Arena::rewind: mark " + std::to_string(mark) +
                                " is past the current size " + std::to_string(size_));
  }
  size_ = mark;
}

std::error_code Arena::reset() noexcept {
  size_ = 0;
  return trim();
}

std::error_code Arena::trim(std::size_t keep_bytes) noexcept {
  // Decommit inward: keep every first-granule-sized step that holds a live byte. An empty arena
  // has nothing committed.
  if (committed_ == 0) return {};
  std::size_t target = committed_;
  if (std::size_t r; round_up(std::max(size_, keep_bytes), granule_, &r) && r < committed_) {
    target = r;
  }
  if (target >= committed_) return {};
  if (std::error_code ec = pal::decommit(base_ + target, committed_ - target)) {
    return ec;  // the pages may still be accessible: keep counting them as committed
  }
  committed_ = target;
  return {};
}

bool Arena::contains(const void* p, std::size_t n) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(base_);
  return base_ != nullptr && addr >= lo && n <= size_ && addr - lo <= size_ - n;
}

}  // namespace reservoir
