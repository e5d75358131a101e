// The fault-injection sweep: random operation sequences on DynArray (trivial and non-trivial T)
// and Arena, run once cleanly to count the OS calls of each kind, then once more for every one of
// those calls failing. After each failure: the documented exception (or try_ result), the object
// exactly as before (sizes and every element), no leak, and the object still usable. Counts of
// what was injected are printed for docs/reliability.md.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "support.hpp"

using reservoir::Arena;
using reservoir::ArenaOptions;
using reservoir::DynArray;
using test::Tracked;
namespace pal = reservoir::pal;

namespace {

constexpr pal::Op kOps[] = {pal::Op::reserve, pal::Op::commit,   pal::Op::decommit,
                            pal::Op::release, pal::Op::prefault, pal::Op::guard};
const char* op_name(pal::Op op) {
  switch (op) {
    case pal::Op::reserve:
      return "reserve";
    case pal::Op::commit:
      return "commit";
    case pal::Op::decommit:
      return "decommit";
    case pal::Op::release:
      return "release";
    case pal::Op::prefault:
      return "prefault";
    case pal::Op::guard:
      return "guard";
    default:
      return "?";
  }
}

// Small steps, so a short sequence crosses many commit boundaries.
ArenaOptions small_steps() {
  ArenaOptions o;
  o.commit_granule = pal::page_size();
  o.max_commit_step = 4 * pal::page_size();
  return o;
}

struct SweepTotals {
  std::uint64_t runs = 0, injected = 0, failures_seen = 0, operations = 0;
};

// The state of the slot pools each run starts from: empty (every small arena carves a slot from
// a chunk it reserves), or warm (free slots that kept some pages, more than the next arena's
// commit granule or reservation takes, fewer, or none).
enum class Pools { empty, warm };
Pools g_pools = Pools::empty;

void prepare_pools() {
  reservoir::trim_pools();
  if (g_pools == Pools::empty) return;
  std::vector<Arena> parked;
  for (std::size_t kib : {200, 80, 60, 12, 4, 900}) {
    Arena& a = parked.emplace_back(kib * 1024);
    a.grow(kib * 1024 / (parked.size() % 3 + 1));
  }
  parked.emplace_back(80 * 1024);  // a slot with nothing committed
  // Slots of the large class a default array takes under a budget of 1 (64 MiB): one that kept
  // pages, one with none. Skipped where the OS refuses their chunk (nothing to warm then).
  std::error_code ec;
  for (std::size_t kib : {0, 100}) {
    if (std::optional<Arena> a = Arena::create(std::size_t{64} << 20, {}, &ec)) {
      if (kib != 0 && a->try_grow(kib * 1024) == nullptr) continue;
      parked.push_back(std::move(*a));
    }
  }
}

// Runs `run` cleanly, then with every call of every OS operation failing once, in turn. Each run
// starts from the same pool state (prepare_pools), so the calls counted are the calls made. With
// `both_chunk_kinds`, where the OS makes open reservations (Linux), the large classes' chunks are
// open (set_open_pool_chunks(true)) in one pass (no commit call inside a slot, a guard call per
// slot carved) and closed in another (the other systems' way): for the sequences that take large
// slots (default arrays); the others run the same calls in both.
// With `both_chunk_kinds`, where the kernel has guard markers, a third pass has the chunks
// guarded (the kind the library takes past a quarter of its mapping budget): a small fake
// vm.max_map_count, and arenas of their own holding a quarter of its half, alive through it.
template <class Run>
SweepTotals sweep(const char* what, Run run, bool both_chunk_kinds = false) {
  reservoir::set_reservation_cache_limit(0);  // deterministic: every arena reserves afresh
  SweepTotals totals;
  for (int pass = 0; pass < 3; ++pass) {
    const bool closed = pass == 1;
    const bool guarded = pass == 2;
    if (closed && (!both_chunk_kinds || !test::open_reservations_here())) break;
    if (guarded && !pal::guard_markers()) break;
    pal::testing::refuse_open_reservations(closed);
    struct Reopen {
      ~Reopen() {
        pal::testing::refuse_open_reservations(false);
        pal::testing::set_max_map_count(0);
      }
    } reopen;
    std::vector<Arena> holding;  // the mappings that make the chunks guarded
    if (guarded) {
      reservoir::trim_pools();  // no chunk of an earlier pass's kind is carved from
      pal::testing::set_max_map_count(2000);
      ArenaOptions own;
      own.reuse_reservation = false;
      while (holding.size() < 100) {
        holding.emplace_back(pal::page_size(), own);
        holding.back().grow(1);
      }
    }
    const test::PoolChunks chunks(pass == 0);  // open: the opt-in (closed is the default)
    for (pal::Op op : kOps) {
      prepare_pools();
      const std::uint64_t before = pal::testing::calls(op);
      totals.operations += run();
      const std::uint64_t calls = pal::testing::calls(op) - before;
      // Guarded chunks move a guard at every commit: the pass does make them.
      if (guarded && op == pal::Op::guard) CHECK(calls > 0);
      for (std::uint64_t k = 0; k < calls; ++k) {
        prepare_pools();
        // Armed by hand: test::FaultGuard would empty the pools that prepare_pools() warmed.
        struct Disarm {
          ~Disarm() { pal::testing::clear(); }
        } disarm;
        pal::testing::fail(op, k, 1, pal::testing::out_of_memory_error());
        CAPTURE(op_name(op));
        CAPTURE(k);
        totals.failures_seen += run();
        ++totals.injected;
        ++totals.runs;
      }
    }
  }
  reservoir::trim_pools();  // no chunk of the last pass's kind outlives it
  reservoir::set_reservation_cache_limit(16);
  std::printf("fault sweep %-22s: %llu OS-call failures injected, %llu operations checked\n", what,
              static_cast<unsigned long long>(totals.injected),
              static_cast<unsigned long long>(totals.failures_seen + totals.operations));
  return totals;
}

int value_of(int v) {
  return v;
}
int value_of(const Tracked& t) {
  return t.value;
}

// The state a sequence starts from: an explicit reservation, or one of the empty states with no
// reservation yet (the first growth reserves the default way).
enum class Start { sized, fresh, moved_from, swapped_out };

// One random sequence on a DynArray<T> against a std::vector<int> model. Returns the number of
// operations performed.
template <class T>
std::uint64_t dynarray_sequence(std::uint32_t seed, Start start = Start::sized) {
  std::mt19937 rng(seed);
  std::vector<int> model;
  std::uint64_t ops = 0;
  {
    std::optional<DynArray<T>> holder;
    try {
      switch (start) {
        case Start::sized:
          holder.emplace(reservoir::max_elements(20'000), small_steps());
          break;
        case Start::fresh:
          holder.emplace();
          break;
        case Start::moved_from: {
          holder.emplace(reservoir::max_elements(20'000), small_steps());
          holder->push_back(T(1));
          DynArray<T> sink(std::move(*holder));
          break;
        }
        case Start::swapped_out: {
          holder.emplace(reservoir::max_elements(20'000), small_steps());
          holder->push_back(T(2));
          DynArray<T> fresh;
          swap(*holder, fresh);
          break;
        }
      }
    } catch (const std::bad_alloc&) {
      return 1;  // the reservation itself was refused: documented, nothing to check
    }
    DynArray<T>* a = &*holder;
    auto same = [&] {
      REQUIRE(a->size() == model.size());
      for (std::size_t i = 0; i < model.size(); ++i)
        REQUIRE(value_of((*a)[i]) == model[i]);
    };
    for (int step = 0; step < 120; ++step, ++ops) {
      const std::size_t size = a->size(), capacity = a->capacity();
      const int v = static_cast<int>(rng() % 1000);
      const auto kind = static_cast<unsigned>(rng() % 13);
      bool threw = false;
      try {
        switch (kind) {
          case 0:
          case 1:
            a->push_back(T(v));
            model.push_back(v);
            break;
          case 2:
            if (a->try_push_back(T(v))) {
              model.push_back(v);
            } else {
              threw = true;  // a refusal: must leave the array as it was
            }
            break;
          case 3: {
            std::vector<T> r;
            const std::size_t n = rng() % 3000;
            for (std::size_t i = 0; i < n; ++i)
              r.emplace_back(v + static_cast<int>(i));
            a->append_range(r);
            for (std::size_t i = 0; i < n; ++i)
              model.push_back(v + static_cast<int>(i));
            break;
          }
          case 4: {
            const std::size_t n = rng() % 25'000;  // sometimes past max_size: length_error
            a->resize(n, T(v));
            model.resize(n, v);
            break;
          }
          case 5:
            a->reserve(rng() % 25'000);
            break;
          case 6:
            a->shrink_to_fit();  // a refused decommit keeps memory committed; nothing else
            break;
          case 7:
            if (!model.empty()) {
              a->pop_back();
              model.pop_back();
            }
            break;
          case 8: {
            const std::size_t pos = model.empty() ? 0 : rng() % model.size();
            a->insert(a->begin() + static_cast<std::ptrdiff_t>(pos), T(v));
            model.insert(model.begin() + static_cast<std::ptrdiff_t>(pos), v);
            break;
          }
          case 9:
            if (!model.empty()) {
              const std::size_t pos = rng() % model.size();
              a->erase(a->begin() + static_cast<std::ptrdiff_t>(pos));
              model.erase(model.begin() + static_cast<std::ptrdiff_t>(pos));
            }
            break;
          case 10: {
            DynArray<T> copy = a->clone();  // a new reservation: may be refused
            REQUIRE(copy.size() == model.size());
            *a = std::move(copy);  // the old reservation is released (or refused: a leak only)
            break;
          }
          case 11:
            a->clear();
            model.clear();
            if (rng() % 2) a->shrink_to_fit();
            break;
          case 12: {
            // Through the moved-from state and back: the elements stay where they are.
            const T* data = a->data();
            DynArray<T> taken(std::move(*a));
            REQUIRE(a->empty());
            if (rng() % 2) {
              *a = std::move(taken);
            } else {
              swap(*a, taken);
            }
            REQUIRE(a->data() == data);
            break;
          }
        }
      } catch (const std::length_error&) {
        threw = true;
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      if (threw) {
        // Strong guarantee: exactly as before, capacity included, every element intact.
        REQUIRE(a->size() == size);
        REQUIRE(a->capacity() == capacity);
        same();
      }
      REQUIRE(a->size() == model.size());
      REQUIRE(a->capacity() >= a->size());
      if constexpr (std::is_same_v<T, Tracked>) {
        REQUIRE(Tracked::live() == static_cast<long long>(a->size()));
      }
    }
    same();
  }
  if constexpr (std::is_same_v<T, Tracked>) REQUIRE(Tracked::live() == 0);
  return ops;
}

// One random sequence on an Arena against a byte model of its contents.
std::uint64_t arena_sequence(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::optional<Arena> holder;
  try {
    holder.emplace(512 * 1024, small_steps());
  } catch (const std::bad_alloc&) {
    return 1;
  }
  Arena& a = *holder;
  std::vector<unsigned char> model;
  std::uint64_t ops = 0;
  auto same = [&] {
    REQUIRE(a.size() == model.size());
    REQUIRE((model.empty() || std::memcmp(a.base(), model.data(), model.size()) == 0));
  };
  for (int step = 0; step < 150; ++step, ++ops) {
    const std::size_t size = a.size(), committed = a.committed();
    const auto fill = static_cast<unsigned char>(rng());
    bool failed = false;
    try {
      switch (rng() % 8) {
        case 0:
        case 1: {
          const std::size_t n = rng() % 40'000;  // sometimes past the reservation
          auto* p = static_cast<unsigned char*>(a.grow(n));
          if (n) std::memset(p, fill, n);
          model.insert(model.end(), n, fill);
          break;
        }
        case 2: {
          const std::size_t n = rng() % 20'000;
          if (auto* p = static_cast<unsigned char*>(a.try_grow(n))) {
            if (n) std::memset(p, fill, n);
            model.insert(model.end(), n, fill);
          } else {
            failed = true;
          }
          break;
        }
        case 3: {
          const std::size_t align = std::size_t{1} << (rng() % 10);
          const std::size_t n = rng() % 5000;
          auto* p = static_cast<unsigned char*>(a.allocate(n, align));
          REQUIRE(reinterpret_cast<std::uintptr_t>(p) % align == 0);
          model.resize(static_cast<std::size_t>(p - reinterpret_cast<unsigned char*>(a.base())), 0);
          // Padding bytes are whatever the arena held: copy them into the model. (Zero-length
          // memcpy/memset with a null pointer is still undefined: guard them.)
          if (model.size() > size)
            std::memcpy(model.data() + size, a.base() + size, model.size() - size);
          if (n) std::memset(p, fill, n);
          model.insert(model.end(), n, fill);
          break;
        }
        case 4:
          a.commit(rng() % 600'000);
          break;
        case 5:
          (void)a.trim(rng() % 100'000);  // refused decommit: memory stays, nothing lost
          break;
        case 6: {
          const std::size_t n = model.empty() ? 0 : rng() % (model.size() + 1);
          (void)a.shrink(n);
          model.resize(n);
          break;
        }
        case 7: {
          const std::size_t n = model.empty() ? 0 : rng() % (model.size() + 1);
          a.rewind(n);
          model.resize(n);
          break;
        }
      }
    } catch (const std::length_error&) {
      failed = true;
    } catch (const std::bad_alloc&) {
      failed = true;
    }
    if (failed) {
      REQUIRE(a.size() == size);
      REQUIRE(a.committed() == committed);
      same();
    }
    REQUIRE(a.committed() >= a.size());
  }
  same();
  return ops;
}

// An element whose copy throws when the armed countdown reaches 0; moves never throw, so every
// assignment owes the strong guarantee. 512 bytes, so a page holds 8 and small sources already
// exceed capacity().
struct CopyBomb {
  static inline long long live = 0;
  static inline long long countdown = -1;  // -1: never
  int value = 0;
  unsigned char pad[508] = {};
  explicit CopyBomb(int v) noexcept : value(v) { ++live; }
  CopyBomb(const CopyBomb& o) : value(o.value) {
    if (countdown >= 0 && countdown-- == 0) throw std::runtime_error("CopyBomb");
    ++live;
  }
  CopyBomb(CopyBomb&& o) noexcept : value(o.value) { ++live; }
  CopyBomb& operator=(const CopyBomb& o) {
    if (countdown >= 0 && countdown-- == 0) throw std::runtime_error("CopyBomb");
    value = o.value;
    return *this;
  }
  CopyBomb& operator=(CopyBomb&& o) noexcept {
    value = o.value;
    return *this;
  }
  ~CopyBomb() { --live; }
};

// The states an assignment starts from.
enum class AssignStart { empty_default, empty_reserved, partial, full };

DynArray<CopyBomb> assign_start(AssignStart start) {
  if (start == AssignStart::empty_default) return DynArray<CopyBomb>();
  DynArray<CopyBomb> a(reservoir::max_elements(400), small_steps());
  a.reserve(3);
  if (start == AssignStart::partial) {
    for (int i = 0; i < 3; ++i)
      a.emplace_back(100 + i);
  } else if (start == AssignStart::full) {
    for (int i = 0; a.size() < a.capacity(); ++i)
      a.emplace_back(100 + i);
  }
  return a;
}

std::vector<int> values_of(const DynArray<CopyBomb>& a) {
  std::vector<int> out;
  for (const CopyBomb& e : a)
    out.push_back(e.value);
  return out;
}

// A single-pass input iterator over CopyBombs.
struct BombInput {
  using value_type = CopyBomb;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::input_iterator_tag;
  const CopyBomb* p = nullptr;
  const CopyBomb& operator*() const { return *p; }
  BombInput& operator++() {
    ++p;
    return *this;
  }
  void operator++(int) { ++p; }
  friend bool operator==(const BombInput& a, const BombInput& b) { return a.p == b.p; }
};
static_assert(std::input_iterator<BombInput> && !std::forward_iterator<BombInput>);

// Runs `assign` on a fresh array in `start` with the k-th copy throwing, for k = 0, 1, ... until
// it succeeds: every throw leaves size(), the elements and capacity() as before and leaks
// nothing; the success leaves `expected`. Returns the number of throws seen.
template <class Assign>
long long sweep_copies(AssignStart start, const std::vector<int>& expected, Assign assign) {
  for (long long k = 0;; ++k) {
    CAPTURE(k);
    DynArray<CopyBomb> a = assign_start(start);
    const std::vector<int> before = values_of(a);
    const std::size_t capacity = a.capacity();
    const long long live = CopyBomb::live;
    CopyBomb::countdown = k;
    bool threw = false;
    try {
      assign(a);
    } catch (const std::runtime_error&) {
      threw = true;
    }
    CopyBomb::countdown = -1;
    if (!threw) {
      REQUIRE(values_of(a) == expected);
      return k;
    }
    REQUIRE(values_of(a) == before);
    REQUIRE(a.capacity() == capacity);
    REQUIRE(CopyBomb::live == live);
    REQUIRE(k < 100'000);
  }
}

}  // namespace

TEST_SUITE("fault_sweep") {
  TEST_CASE("DynArray<int>: every OS failure at every position loses nothing") {
    for (std::uint32_t seed : {1u, 2u, 3u}) {
      CAPTURE(seed);
      const SweepTotals t = sweep("DynArray<int>", [seed] { return dynarray_sequence<int>(seed); });
      CHECK(t.injected > 20);
    }
  }

  TEST_CASE("warm slot pools: every OS failure at every position loses nothing, leaks nothing") {
    g_pools = Pools::warm;
    for (std::uint32_t seed : {11u, 12u}) {
      CAPTURE(seed);
      Tracked::reset();
      CHECK(sweep("warm pools DynArray<int>", [seed] {
              return dynarray_sequence<int>(seed);
            }).injected > 20);
      CHECK(sweep("warm pools DynArray<Tracked>", [seed] {
              return dynarray_sequence<Tracked>(seed);
            }).injected > 20);
      CHECK(Tracked::live() == 0);
      CHECK(sweep("warm pools Arena", [seed] { return arena_sequence(seed); }).injected > 20);
    }
    g_pools = Pools::empty;
  }

  TEST_CASE("DynArray<Tracked>: every OS failure at every position loses nothing, leaks nothing") {
    for (std::uint32_t seed : {4u, 5u}) {
      CAPTURE(seed);
      Tracked::reset();
      const SweepTotals t =
          sweep("DynArray<Tracked>", [seed] { return dynarray_sequence<Tracked>(seed); });
      CHECK(t.injected > 20);
      CHECK(Tracked::live() == 0);
    }
  }

  TEST_CASE("DynArray from every empty state: every OS failure at every position loses nothing") {
    // Default-constructed, moved-from and swapped-out arrays have no reservation until they grow:
    // the first growth reserves the default way (falling back to less if refused) under the same
    // injected failures.
    // A refused release leaks its mapping (documented): with budget 1, default arrays reserve
    // 64 MiB each instead of 64 GiB, so the leaks of hundreds of injected failures fit in any
    // address space (valgrind's is far smaller than the native one).
    struct BudgetGuard {
      std::size_t saved = reservoir::address_space_budget();
      BudgetGuard() { reservoir::set_address_space_budget(1); }
      ~BudgetGuard() { reservoir::set_address_space_budget(saved); }
    } budget;
    std::uint32_t seed = 20;
    // The empty pools, then warm ones: the first growth may take a parked large slot that
    // arrives with pages committed.
    for (Start start : {Start::fresh, Start::moved_from, Start::swapped_out, Start::fresh}) {
      if (seed == 23) g_pools = Pools::warm;
      CAPTURE(static_cast<int>(start));
      CAPTURE(g_pools == Pools::warm);
      Tracked::reset();
      const SweepTotals t = sweep(
          "DynArray<Tracked> empty", [&] { return dynarray_sequence<Tracked>(seed, start); }, true);
      CHECK(t.injected > 20);
      CHECK(Tracked::live() == 0);
      const SweepTotals ti =
          sweep("DynArray<int> empty", [&] { return dynarray_sequence<int>(seed, start); }, true);
      CHECK(ti.injected > 20);
      ++seed;
    }
    g_pools = Pools::empty;
  }

  TEST_CASE("Arena: every OS failure at every position loses nothing") {
    for (std::uint32_t seed : {6u, 7u, 8u}) {
      CAPTURE(seed);
      const SweepTotals t = sweep("Arena", [seed] { return arena_sequence(seed); });
      CHECK(t.injected > 20);
    }
  }

  TEST_CASE("every assignment, from every state, with every copy throwing: strong guarantee") {
    CopyBomb::live = 0;
    long long throws = 0;
    for (AssignStart start : {AssignStart::empty_default, AssignStart::empty_reserved,
                              AssignStart::partial, AssignStart::full}) {
      CAPTURE(static_cast<int>(start));
      const std::size_t capacity = assign_start(start).capacity();
      // A source smaller than the capacity (or than the old contents) and one larger.
      for (std::size_t n : {std::size_t{2}, capacity + 5}) {
        CAPTURE(n);
        std::vector<CopyBomb> source;
        std::vector<int> expected;
        for (std::size_t i = 0; i < n; ++i) {
          source.emplace_back(static_cast<int>(i));
          expected.push_back(static_cast<int>(i));
        }
        const DynArray<CopyBomb> source_array(source.begin(), source.end());
        const std::deque<CopyBomb> source_deque(source.begin(), source.end());
        throws += sweep_copies(start, std::vector<int>(n, 0),
                               [&](DynArray<CopyBomb>& a) { a.assign(n, source[0]); });
        throws += sweep_copies(start, expected, [&](DynArray<CopyBomb>& a) {
          a.assign(source.begin(), source.end());
        });
        throws += sweep_copies(start, expected, [&](DynArray<CopyBomb>& a) {
          a.assign(BombInput{source.data()}, BombInput{source.data() + n});
        });
        throws += sweep_copies(start, expected,
                               [&](DynArray<CopyBomb>& a) { a.assign_range(source_deque); });
        throws += sweep_copies(start, expected, [&](DynArray<CopyBomb>& a) { a = source_array; });
        throws += sweep_copies(start, expected, [&](DynArray<CopyBomb>& a) {
          DynArray<CopyBomb> moved(source_array);  // may throw: a stays as it was
          a = std::move(moved);
        });
      }
      // The initializer-list forms: 12 elements, more than one page holds.
      std::vector<int> twelve(12);
      std::iota(twelve.begin(), twelve.end(), 0);
      throws += sweep_copies(start, twelve, [](DynArray<CopyBomb>& a) {
        a.assign({CopyBomb(0), CopyBomb(1), CopyBomb(2), CopyBomb(3), CopyBomb(4), CopyBomb(5),
                  CopyBomb(6), CopyBomb(7), CopyBomb(8), CopyBomb(9), CopyBomb(10), CopyBomb(11)});
      });
      throws += sweep_copies(start, twelve, [](DynArray<CopyBomb>& a) {
        a = {CopyBomb(0), CopyBomb(1), CopyBomb(2), CopyBomb(3), CopyBomb(4),  CopyBomb(5),
             CopyBomb(6), CopyBomb(7), CopyBomb(8), CopyBomb(9), CopyBomb(10), CopyBomb(11)};
      });
    }
    CHECK(throws > 500);
    CHECK(CopyBomb::live == 0);
    std::printf("fault sweep assignments         : %lld throwing copies checked\n", throws);
  }
}
