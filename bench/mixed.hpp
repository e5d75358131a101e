// The mixed workload: an environment of arrays of arrays that are created, copied, grown, shrunk
// and edited in the middle, in a random but seeded order. It follows the mixed benchmark of the
// rvector thesis: for each element type an environment V<V<T>> starts with one empty inner array,
// and each iteration i (1..I) applies one of six actions chosen uniformly at random.
//
// The random sequence depends only on the seed (std::mt19937_64 with an explicit mapping to
// ranges, so every standard library draws the same numbers), and no decision depends on the
// container, so every container runs exactly the same operations and ends with the same contents:
// checksum() proves it.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <reservoir/dynarray.hpp>

namespace reservoir::bench::mixed {

// ---- element types ----------------------------------------------------------------------------

// A type that owns heap memory and copies it deeply, like most class types in real programs.
struct HeapOwner {
  static constexpr std::size_t kInts = 4;
  std::unique_ptr<int[]> p;

  HeapOwner() : p(new int[kInts]()) {}
  explicit HeapOwner(std::uint64_t v) : p(new int[kInts]) {
    for (std::size_t j = 0; j < kInts; ++j)
      p[j] = static_cast<int>(v + j);
  }
  HeapOwner(const HeapOwner& o) : HeapOwner() { *this = o; }
  HeapOwner(HeapOwner&&) noexcept = default;
  // Containers copy-assign into moved-from elements (insert, erase): those own nothing yet.
  HeapOwner& operator=(const HeapOwner& o) {
    if (this != &o && o.p) {
      if (!p) p.reset(new int[kInts]);
      std::memcpy(p.get(), o.p.get(), kInts * sizeof(int));
    }
    return *this;
  }
  HeapOwner& operator=(HeapOwner&&) noexcept = default;
  ~HeapOwner() = default;
};

using IntArray = std::array<int, 10>;

// The value appended by the v-th push_back: deterministic, different from T().
template <class T>
T make_value(std::uint64_t v) {
  if constexpr (std::is_same_v<T, int>) {
    return static_cast<int>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, IntArray>) {
    IntArray a;
    for (std::size_t j = 0; j < a.size(); ++j)
      a[j] = static_cast<int>(v + j);
    return a;
  } else {
    return T(v);
  }
}

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

template <class T>
std::uint64_t hash_value(const T& x) {
  if constexpr (std::is_same_v<T, int>) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(x));
  } else if constexpr (std::is_same_v<T, std::string>) {
    std::uint64_t h = x.size();
    for (char c : x)
      h = mix(h, static_cast<unsigned char>(c));
    return h;
  } else if constexpr (std::is_same_v<T, IntArray>) {
    std::uint64_t h = 0;
    for (int v : x)
      h = mix(h, static_cast<std::uint32_t>(v));
    return h;
  } else {
    std::uint64_t h = 0;
    for (std::size_t j = 0; j < HeapOwner::kInts; ++j) {
      h = mix(h, static_cast<std::uint32_t>(x.p[j]));
    }
    return h;
  }
}

// ---- the random sequence ----------------------------------------------------------------------

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  // A number in [lo, hi]; the modulo bias (< 2^-40 for the ranges used here) does not matter,
  // the explicit mapping makes the sequence the same with every standard library.
  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) {
    return lo + engine_() % (hi - lo + 1);
  }

 private:
  std::mt19937_64 engine_;
};

// ---- the actions ------------------------------------------------------------------------------

enum Action : int { kPushBack, kPopBack, kConstruct, kCopy, kInsert, kErase, kActions };
inline constexpr const char* kActionNames[kActions] = {"push_back", "pop_back", "construct",
                                                       "copy",      "insert",   "erase"};

struct Stats {
  double seconds[kActions] = {};  // time spent in each action kind
  std::uint64_t count[kActions] = {};
  double total_seconds = 0;
  std::uint64_t checksum = 0;
  std::uint64_t elements = 0;  // elements alive at the end
  std::uint64_t arrays = 0;    // inner arrays at the end
};

// Two containers for the ideal row ("vector_ideal", see run_ideal): SizeOnly tracks an inner
// array's size and nothing else (the first pass: the sizes follow from the random sequence alone),
// IdealVector is a std::vector that the environment reserves, when it creates an inner array, to
// the largest size that array ever reaches, so it never reallocates.
template <class T>
class SizeOnly {
 public:
  SizeOnly() = default;
  explicit SizeOnly(std::size_t n) : size_(n) {}
  std::size_t size() const { return size_; }
  template <class U>
  void push_back(U&&) {
    ++size_;
  }
  void pop_back() { --size_; }
  std::ptrdiff_t begin() const { return 0; }
  template <class U>
  void insert(std::ptrdiff_t, std::size_t m, const U&) {
    size_ += m;
  }
  void erase(std::ptrdiff_t first, std::ptrdiff_t last) {
    size_ -= static_cast<std::size_t>(last - first);
  }

 private:
  std::size_t size_ = 0;
};

template <class T>
class IdealVector : public std::vector<T> {
 public:
  using std::vector<T>::vector;
};

// A copy of an inner array: DynArray copies through clone(), the standard containers by copy
// construction.
template <class Inner>
Inner copy_of(const Inner& a) {
  if constexpr (requires { a.clone(); }) {
    return a.clone();
  } else {
    return Inner(a);
  }
}

// Appends copies of from's elements to x.
template <class Inner>
void append_copy(Inner& x, const Inner& from) {
  x.insert(x.end(), from.begin(), from.end());
}

// One environment V<V<T>> and the state its actions share.
template <template <class> class V, class T>
class Environment {
 public:
  using Inner = V<T>;
  static constexpr bool kSizesOnly = std::is_same_v<Inner, SizeOnly<T>>;
  static constexpr bool kIdeal = std::is_same_v<Inner, IdealVector<T>>;
  // The value type the actions create: a SizeOnly pass creates no elements.
  using Value = std::conditional_t<kSizesOnly, int, T>;

  Environment() { env_.emplace_back(); }

  // SizeOnly: the largest size each inner array reached, by position in the environment.
  const std::vector<std::uint64_t>& high_water() const { return high_; }
  // IdealVector: the sizes to reserve, high_water() of a SizeOnly pass over the same sequence.
  void reserve_for(std::vector<std::uint64_t> high) {
    if constexpr (kIdeal) {
      high_ = std::move(high);
      env_.reserve(high_.size());
      env_[0].reserve(target(0));
    }
  }

  // Some of the first n arrays, drawn one at a time (the count first): each(array), which may
  // draw from rng too between the draws of the indices; an array that grew is noted.
  template <class Each>
  void for_some_arrays(Rng& rng, std::uint64_t n, bool grows, Each each) {
    const std::uint64_t arrays = rng.uniform(1, n / 3 + 1);
    for (std::uint64_t k = 0; k < arrays; ++k) {
      const std::uint64_t at = rng.uniform(0, n - 1);
      each(env_[at]);
      if (grows) note(at);
    }
  }

  // Appends a new inner array: make()'s, or for IdealVector one that reserves its final size and
  // is filled by fill(array).
  template <class Make, class Fill>
  void add_array(Make make, Fill fill) {
    if constexpr (kIdeal) {
      Inner x;
      x.reserve(target(env_.size()));
      fill(x);
      env_.push_back(std::move(x));
    } else {
      env_.push_back(make());
    }
    note(env_.size() - 1);
  }

  // Applies action `a` of iteration i (1-based), drawing from rng.
  void apply(Action a, std::uint64_t i, Rng& rng) {
    const std::uint64_t n = env_.size();
    switch (a) {
      case kPushBack:
        for_some_arrays(rng, n, true, [&](Inner& x) {
          const std::uint64_t m = rng.uniform(1, 100 * i);
          for (std::uint64_t j = 0; j < m; ++j)
            x.push_back(make_value<Value>(next_value_++));
        });
        break;
      case kPopBack:
        for_some_arrays(rng, n, false, [&](Inner& x) {
          const std::uint64_t m = rng.uniform(0, x.size());
          for (std::uint64_t j = 0; j < m; ++j)
            x.pop_back();
        });
        break;
      case kConstruct: {
        const std::uint64_t count = rng.uniform(1, 3);
        for (std::uint64_t k = 0; k < count; ++k) {
          const auto size = static_cast<std::size_t>(rng.uniform(1, i + 10));
          add_array([&] { return Inner(size); }, [&](auto& x) { x.resize(size); });
        }
        break;
      }
      case kCopy: {
        const std::uint64_t count = rng.uniform(1, 3);
        for (std::uint64_t k = 0; k < count; ++k) {
          // The source index is drawn from the arrays that existed before this action.
          const Inner& from = env_[rng.uniform(0, n - 1)];
          add_array([&] { return copy_of(from); }, [&](auto& x) { append_copy(x, from); });
        }
        break;
      }
      case kInsert:
        for_some_arrays(rng, n, true, [&](Inner& x) {
          const std::uint64_t pos = rng.uniform(0, x.size());
          const std::uint64_t m = rng.uniform(1, i);
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<std::size_t>(m),
                   Value());
        });
        break;
      case kErase:
        for_some_arrays(rng, n, false, [&](Inner& x) {
          const std::uint64_t first = rng.uniform(0, x.size());
          const std::uint64_t last = rng.uniform(first, x.size());
          x.erase(x.begin() + static_cast<std::ptrdiff_t>(first),
                  x.begin() + static_cast<std::ptrdiff_t>(last));
        });
        break;
      case kActions:
        break;
    }
  }

  // Sizes and contents of every inner array, in order.
  std::uint64_t checksum() const {
    std::uint64_t h = env_.size();
    for (const Inner& x : env_) {
      h = mix(h, x.size());
      for (const T& v : x)
        h = mix(h, hash_value(v));
    }
    return h;
  }
  std::uint64_t elements() const {
    std::uint64_t s = 0;
    for (const Inner& x : env_)
      s += x.size();
    return s;
  }
  std::uint64_t arrays() const { return env_.size(); }

 private:
  void note(std::size_t at) {
    if constexpr (kSizesOnly) {
      if (at >= high_.size()) high_.resize(at + 1);
      high_[at] = std::max<std::uint64_t>(high_[at], env_[at].size());
    } else if constexpr (kIdeal) {
      assert(env_[at].size() <= target(at));  // it never outgrew its reservation
    }
  }
  std::size_t target(std::size_t at) const {
    return at < high_.size() ? static_cast<std::size_t>(high_[at]) : 0;
  }

  // A SizeOnly pass keeps its arrays in a std::vector (SizeOnly holds no inner arrays).
  std::conditional_t<kSizesOnly, std::vector<Inner>, V<Inner>> env_;
  std::uint64_t next_value_ = 1;
  std::vector<std::uint64_t> high_;  // see high_water() and reserve_for()
};

template <class T>
using DynArrayOf = reservoir::DynArray<T>;
template <class T>
using VectorOf = std::vector<T>;
template <class T>
using DequeOf = std::deque<T>;
template <class T>
using SizeOnlyOf = SizeOnly<T>;
template <class T>
using IdealVectorOf = IdealVector<T>;

// Runs I iterations over one environment per element type in Ts (several types: every iteration
// applies its action to each environment in turn). The action sequence depends only on the seed.
// `high`: for IdealVectorOf, each environment's high_water() from a SizeOnlyOf pass.
template <template <class> class V, class... Ts>
Stats run(std::uint64_t iterations, std::uint64_t seed,
          std::vector<std::vector<std::uint64_t>> high = {}) {
  using Clock = std::chrono::steady_clock;
  Stats s;
  Rng rng(seed);
  const auto start = Clock::now();
  {
    std::tuple<Environment<V, Ts>...> envs;
    if (!high.empty()) {
      std::size_t k = 0;
      std::apply([&](auto&... e) { (e.reserve_for(std::move(high[k++])), ...); }, envs);
    }
    for (std::uint64_t i = 1; i <= iterations; ++i) {
      const auto a = static_cast<Action>(rng.uniform(0, kActions - 1));
      const auto t0 = Clock::now();
      std::apply([&](auto&... e) { (e.apply(a, i, rng), ...); }, envs);
      s.seconds[a] += std::chrono::duration<double>(Clock::now() - t0).count();
      ++s.count[a];
    }
    std::apply(
        [&](const auto&... e) {
          ((s.checksum = mix(s.checksum, e.checksum()), s.elements += e.elements(),
            s.arrays += e.arrays()),
           ...);
        },
        envs);
  }  // destroying the environments is part of the total
  s.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

// The ideal contiguous container: std::vector reserved to each inner array's largest size, so it
// never reallocates (a first, untimed pass over the sizes alone finds them). What it still does
// is what every contiguous container must do: the elements' own construction, copies and
// destruction, the shifts of insert and erase, and the first touch of each buffer. Measurement
// only: the child runs it as container "vector_ideal", the table does not by default.
template <class... Ts>
Stats run_ideal(std::uint64_t iterations, std::uint64_t seed) {
  std::vector<std::vector<std::uint64_t>> high;
  {
    Rng rng(seed);
    std::tuple<Environment<SizeOnlyOf, Ts>...> envs;
    for (std::uint64_t i = 1; i <= iterations; ++i) {
      const auto a = static_cast<Action>(rng.uniform(0, kActions - 1));
      std::apply([&](auto&... e) { (e.apply(a, i, rng), ...); }, envs);
    }
    std::apply([&](const auto&... e) { (high.push_back(e.high_water()), ...); }, envs);
  }
  return run<IdealVectorOf, Ts...>(iterations, seed, std::move(high));
}

inline constexpr const char* kTypes[] = {"int", "string", "array10", "heap", "all"};
inline constexpr const char* kContainers[] = {"dynarray", "vector", "deque"};

// Runs the workload for a container and type named as in kContainers / kTypes; false if a name is
// unknown.
template <template <class> class V>
bool run_type(const std::string& type, std::uint64_t iterations, std::uint64_t seed, Stats* out) {
  auto go = [&]<class... Ts>() {
    if constexpr (std::is_same_v<V<int>, IdealVector<int>>) {
      return run_ideal<Ts...>(iterations, seed);
    } else {
      return run<V, Ts...>(iterations, seed);
    }
  };
  if (type == "int") {
    *out = go.template operator()<int>();
  } else if (type == "string") {
    *out = go.template operator()<std::string>();
  } else if (type == "array10") {
    *out = go.template operator()<IntArray>();
  } else if (type == "heap") {
    *out = go.template operator()<HeapOwner>();
  } else if (type == "all") {
    *out = go.template operator()<int, std::string, IntArray, HeapOwner>();
  } else {
    return false;
  }
  return true;
}

inline bool run_named(const std::string& container, const std::string& type,
                      std::uint64_t iterations, std::uint64_t seed, Stats* out) {
  if (container == "dynarray") return run_type<DynArrayOf>(type, iterations, seed, out);
  if (container == "vector") return run_type<VectorOf>(type, iterations, seed, out);
  if (container == "deque") return run_type<DequeOf>(type, iterations, seed, out);
  if (container == "vector_ideal") return run_type<IdealVectorOf>(type, iterations, seed, out);
  return false;
}

}  // namespace reservoir::bench::mixed
