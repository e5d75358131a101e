// Differential fuzzing: the input bytes are a program of operations on a DynArray of an
// instance-counting type and on an Arena; every step is checked against a std::vector / byte
// buffer model. Built by the `fuzz` preset (clang, -fsanitize=fuzzer,address,undefined);
// scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <reservoir/reservoir.hpp>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_reservoir: model mismatch: %s\n", what);
  std::abort();
}
#define EXPECT(cond)          \
  do {                        \
    if (!(cond)) fail(#cond); \
  } while (0)

// Counts live instances and owns heap memory, so a lost destructor is a leak ASan reports.
struct Counted {
  static inline long long live = 0;
  explicit Counted(int v) : value(v), heap(std::to_string(v) + std::string(20, 'x')) { ++live; }
  Counted(const Counted& o) : value(o.value), heap(o.heap) { ++live; }
  Counted(Counted&& o) noexcept : value(o.value), heap(std::move(o.heap)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) noexcept = default;
  ~Counted() { --live; }
  int value;
  std::string heap;
};

class Input {
 public:
  Input(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  bool done() const { return i_ >= n_; }
  std::uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }

 private:
  const std::uint8_t* d_;
  std::size_t n_, i_ = 0;
};

constexpr std::size_t kMax = 1000;  // small, so length_error is reached (10 commit steps)

void check_array(const reservoir::DynArray<Counted>& a, const std::vector<int>& m) {
  EXPECT(a.size() == m.size());
  EXPECT(a.capacity() >= a.size());
  EXPECT(a.max_size() == kMax);
  for (std::size_t i = 0; i < m.size(); ++i)
    EXPECT(a[i].value == m[i]);
}

void run_array(Input& in) {
  reservoir::ArenaOptions o;
  o.commit_granule = reservoir::pal::page_size();
  o.max_commit_step = 4 * o.commit_granule;
  reservoir::DynArray<Counted> a(reservoir::max_elements(kMax), o),
      other(reservoir::max_elements(kMax), o);
  std::vector<int> m, mo;
  while (!in.done()) {
    const std::uint8_t op = in.byte() % 18;
    const int v = in.byte();
    const std::size_t before = m.size();
    try {
      switch (op) {
        case 0:
          a.push_back(Counted(v));
          m.push_back(v);
          break;
        case 1:
          a.emplace_back(v);
          m.push_back(v);
          break;
        case 2:
          if (a.try_emplace_back(v))
            m.push_back(v);
          else
            EXPECT(m.size() == kMax);
          break;
        case 3:
          if (!m.empty()) {
            a.pop_back();
            m.pop_back();
          } else {
            try {
              a.pop_back();
              fail("pop_back on empty");
            } catch (const std::out_of_range&) {
            }
          }
          break;
        case 4: {
          const std::size_t p = m.empty() ? 0 : in.u16() % (m.size() + 1);
          a.insert(a.begin() + static_cast<std::ptrdiff_t>(p), Counted(v));
          m.insert(m.begin() + static_cast<std::ptrdiff_t>(p), v);
          break;
        }
        case 5:
          if (!m.empty()) {
            const std::size_t p = in.u16() % m.size();
            const std::size_t q = p + in.u16() % (m.size() - p + 1);
            a.erase(a.begin() + static_cast<std::ptrdiff_t>(p),
                    a.begin() + static_cast<std::ptrdiff_t>(q));
            m.erase(m.begin() + static_cast<std::ptrdiff_t>(p),
                    m.begin() + static_cast<std::ptrdiff_t>(q));
          }
          break;
        case 6: {
          const std::size_t n = in.u16() % (kMax + 100);
          a.resize(n, Counted(v));
          m.resize(n, v);
          break;
        }
        case 7:
          a.reserve(in.u16() % (kMax + 100));
          break;
        case 8:
          a.clear();
          m.clear();
          break;
        case 9:
          a.shrink_to_fit();
          break;
        case 10: {
          reservoir::DynArray<Counted> moved(std::move(a));
          EXPECT(a.empty());
          a = std::move(moved);
          EXPECT(a.max_size() == kMax);
          break;
        }
        case 11:
          swap(a, other);
          std::swap(m, mo);
          break;
        case 12: {
          std::vector<Counted> r;
          const int n = v % 64;
          for (int i = 0; i < n; ++i)
            r.emplace_back(v + i);
          a.append_range(r);
          for (int i = 0; i < n; ++i)
            m.push_back(v + i);
          break;
        }
        case 13: {
          reservoir::DynArray<Counted> c = a.clone();
          EXPECT(c.size() == m.size());
          other = std::move(c);
          mo = m;
          break;
        }
        case 14: {
          const std::size_t p = m.empty() ? 0 : in.u16() % (m.size() + 1);
          const std::size_t n = v % 8;
          a.insert(a.begin() + static_cast<std::ptrdiff_t>(p), n, Counted(v));
          m.insert(m.begin() + static_cast<std::ptrdiff_t>(p), n, v);
          break;
        }
        case 15:
          if (!m.empty()) {
            const std::size_t i = in.u16() % m.size();
            EXPECT(a.at(i).value == m[i]);
          }
          try {
            (void)a.at(m.size());
            fail("at past the end");
          } catch (const std::out_of_range&) {
          }
          break;
        case 16: {
          const std::size_t n = in.u16() % (kMax + 100);
          a.assign(n, Counted(v));
          m.assign(n, v);
          break;
        }
        case 17: {
          std::vector<Counted> r;
          for (int i = 0; i < v % 32; ++i)
            r.emplace_back(v - i);
          a.assign_range(r);
          m.clear();
          for (const Counted& c : r)
            m.push_back(c.value);
          break;
        }
      }
    } catch (const std::length_error&) {
      EXPECT(m.size() == before);  // only growth past kMax throws this, and it changes nothing
    }
    check_array(a, m);
    check_array(other, mo);
    EXPECT(Counted::live == static_cast<long long>(m.size() + mo.size()));
  }
}

void run_arena(Input& in) {
  reservoir::ArenaOptions o;
  o.commit_granule = reservoir::pal::page_size();
  o.max_commit_step = 8 * o.commit_granule;
  reservoir::Arena a(256 * 1024, o);
  std::vector<unsigned char> m;
  auto same = [&] {
    EXPECT(a.size() == m.size());
    EXPECT(a.committed() >= a.size());
    EXPECT(m.empty() || std::memcmp(a.base(), m.data(), m.size()) == 0);
  };
  while (!in.done()) {
    const std::uint8_t op = in.byte() % 7;
    const auto fill = in.byte();
    const std::size_t n = in.u16();
    const std::size_t before = m.size(), committed = a.committed();
    try {
      switch (op) {
        case 0: {
          auto* p = static_cast<unsigned char*>(a.grow(n));
          std::memset(p, fill, n);
          m.insert(m.end(), n, fill);
          break;
        }
        case 1: {
          const std::size_t align = std::size_t{1} << (fill % 13);
          auto* p = static_cast<unsigned char*>(a.allocate(n % 4096, align));
          EXPECT(reinterpret_cast<std::uintptr_t>(p) % align == 0);
          const std::size_t off =
              static_cast<std::size_t>(p - reinterpret_cast<unsigned char*>(a.base()));
          m.resize(off, 0);
          if (off > before) std::memcpy(m.data() + before, a.base() + before, off - before);
          if (n % 4096) std::memset(p, fill, n % 4096);
          m.insert(m.end(), n % 4096, fill);
          break;
        }
        case 2: {
          const std::size_t k = m.empty() ? 0 : n % (m.size() + 1);
          (void)a.shrink(k);
          m.resize(k);
          break;
        }
        case 3:
          (void)a.reset();
          m.clear();
          break;
        case 4:
          a.reserve(n * 4);
          break;
        case 5:
          (void)a.trim(n);
          break;
        case 6: {
          const std::size_t k = m.empty() ? 0 : n % (m.size() + 1);
          a.rewind(k);
          m.resize(k);
          break;
        }
      }
    } catch (const std::length_error&) {
      EXPECT(m.size() == before);
      EXPECT(a.committed() == committed);
    }
    same();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Input in(data + 1, size - 1);
  if (data[0] & 1) {
    run_array(in);
    EXPECT(Counted::live == 0);
  } else {
    run_arena(in);
  }
  return 0;
}
