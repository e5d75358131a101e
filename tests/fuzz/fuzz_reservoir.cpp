// Differential fuzzing: the input bytes are a program of operations on a DynArray of an
// instance-counting type (starting from any state: reserved, default-constructed, moved-from,
// swapped out), on a tree of nested DynArrays, and on an Arena; every step is checked against a
// std::vector / byte buffer model. Built by the `fuzz` preset (clang,
// -fsanitize=fuzzer,address,undefined); scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <reservoir/pal.hpp>
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

using Array = reservoir::DynArray<Counted>;

// What the model knows of an array besides its elements: whether it has the explicit reservation
// of kMax (otherwise the default one, made on first growth, which may be smaller than
// default_max_size() where the OS refuses it).
struct Model {
  std::vector<int> v;
  bool sized = true;
};

void check_array(const Array& a, const Model& m) {
  EXPECT(a.size() == m.v.size());
  EXPECT(a.capacity() >= a.size());
  if (m.sized) {
    EXPECT(a.max_size() == kMax);
  } else {
    EXPECT(a.max_size() <= Array::default_max_size());
    EXPECT(a.max_size() >= a.size());
  }
  for (std::size_t i = 0; i < m.v.size(); ++i)
    EXPECT(a[i].value == m.v[i]);
}

reservoir::ArenaOptions small_steps() {
  reservoir::ArenaOptions o;
  o.commit_granule = reservoir::pal::page_size();
  o.max_commit_step = 4 * o.commit_granule;
  return o;
}

// An array in one of the states a program can hand us: with an explicit reservation,
// default-constructed, moved-from, or swapped out for an empty one. The last three have no
// reservation until they grow.
Array make_array(std::uint8_t state, Model& m) {
  m.v.clear();
  m.sized = state % 4 == 0;
  switch (state % 4) {
    case 0:
      return Array(reservoir::max_elements(kMax), small_steps());
    case 1:
      return Array();
    case 2: {
      Array donor(reservoir::max_elements(kMax), small_steps());
      donor.emplace_back(1);
      Array sink(std::move(donor));
      return Array(std::move(donor));  // NOLINT(bugprone-use-after-move): moved-from is defined
    }
    default: {
      Array full(reservoir::max_elements(kMax), small_steps());
      full.emplace_back(2);
      Array empty;
      swap(full, empty);
      return full;
    }
  }
}

void run_array(Input& in) {
  Model m, mo;
  const std::uint8_t states = in.byte();
  Array a = make_array(states, m);
  Array other = make_array(static_cast<std::uint8_t>(states >> 2), mo);
  while (!in.done()) {
    const std::uint8_t op = in.byte() % 20;
    const int v = in.byte();
    const std::size_t before = m.v.size();
    try {
      switch (op) {
        case 0:
          a.push_back(Counted(v));
          m.v.push_back(v);
          break;
        case 1:
          a.emplace_back(v);
          m.v.push_back(v);
          break;
        case 2:
          if (a.try_emplace_back(v))
            m.v.push_back(v);
          else
            EXPECT(m.sized && m.v.size() == kMax);
          break;
        case 3:
          if (!m.v.empty()) {
            a.pop_back();
            m.v.pop_back();
          } else {
            try {
              a.pop_back();
              fail("pop_back on empty");
            } catch (const std::out_of_range&) {
            }
          }
          break;
        case 4: {
          const std::size_t p = m.v.empty() ? 0 : in.u16() % (m.v.size() + 1);
          a.insert(a.begin() + static_cast<std::ptrdiff_t>(p), Counted(v));
          m.v.insert(m.v.begin() + static_cast<std::ptrdiff_t>(p), v);
          break;
        }
        case 5:
          if (!m.v.empty()) {
            const std::size_t p = in.u16() % m.v.size();
            const std::size_t q = p + in.u16() % (m.v.size() - p + 1);
            a.erase(a.begin() + static_cast<std::ptrdiff_t>(p),
                    a.begin() + static_cast<std::ptrdiff_t>(q));
            m.v.erase(m.v.begin() + static_cast<std::ptrdiff_t>(p),
                      m.v.begin() + static_cast<std::ptrdiff_t>(q));
          }
          break;
        case 6: {
          const std::size_t n = in.u16() % (kMax + 100);
          a.resize(n, Counted(v));
          m.v.resize(n, v);
          break;
        }
        case 7:
          a.reserve(in.u16() % (kMax + 100));
          break;
        case 8:
          a.clear();
          m.v.clear();
          break;
        case 9:
          a.shrink_to_fit();
          break;
        case 10: {
          const Counted* data = a.data();
          reservoir::DynArray<Counted> moved(std::move(a));
          EXPECT(a.empty());
          EXPECT(a.data() == nullptr);
          a = std::move(moved);
          EXPECT(a.data() == data);
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
            m.v.push_back(v + i);
          break;
        }
        case 13: {
          reservoir::DynArray<Counted> c = a.clone();
          EXPECT(c.size() == m.v.size());
          other = std::move(c);
          mo = m;
          break;
        }
        case 14: {
          const std::size_t p = m.v.empty() ? 0 : in.u16() % (m.v.size() + 1);
          const std::size_t n = v % 8;
          a.insert(a.begin() + static_cast<std::ptrdiff_t>(p), n, Counted(v));
          m.v.insert(m.v.begin() + static_cast<std::ptrdiff_t>(p), n, v);
          break;
        }
        case 15:
          if (!m.v.empty()) {
            const std::size_t i = in.u16() % m.v.size();
            EXPECT(a.at(i).value == m.v[i]);
          }
          try {
            (void)a.at(m.v.size());
            fail("at past the end");
          } catch (const std::out_of_range&) {
          }
          break;
        case 16: {
          const std::size_t n = in.u16() % (kMax + 100);
          a.assign(n, Counted(v));
          m.v.assign(n, v);
          break;
        }
        case 17: {
          std::vector<Counted> r;
          for (int i = 0; i < v % 32; ++i)
            r.emplace_back(v - i);
          a.assign_range(r);
          m.v.clear();
          for (const Counted& c : r)
            m.v.push_back(c.value);
          break;
        }
        case 18:  // other takes a's elements and reservation; a is left moved-from
          other = std::move(a);
          mo = m;
          m = Model{{}, false};
          break;
        case 19:  // a restarts from one of the states
          a = make_array(static_cast<std::uint8_t>(v), m);
          break;
      }
    } catch (const std::length_error&) {
      // Only growth past kMax throws this, and it changes nothing.
      EXPECT(m.sized && m.v.size() == before);
    }
    check_array(a, m);
    check_array(other, mo);
    EXPECT(Counted::live == static_cast<long long>(m.v.size() + mo.v.size()));
  }
}

// A tree whose nodes own an array of nodes (T incomplete where DynArray<Node> is declared), against
// the same tree built of std::vector. Moves between a parent's array and a child's exercise
// arrays that own, or are owned by, the object being assigned.
struct Node {
  static inline long long live = 0;
  int value = 0;
  reservoir::DynArray<Node> kids;
  explicit Node(int v) : value(v) { ++live; }
  Node(const Node& o) : value(o.value), kids(o.kids) { ++live; }
  Node(Node&& o) noexcept : value(o.value), kids(std::move(o.kids)) { ++live; }
  Node& operator=(const Node&) = default;
  Node& operator=(Node&&) noexcept = default;
  ~Node() { --live; }
};
struct MNode {
  int value = 0;
  std::vector<MNode> kids;
};

long long count(const MNode& m) {
  long long n = 0;
  for (const MNode& k : m.kids)
    n += 1 + count(k);
  return n;
}
void check_tree(const Node& n, const MNode& m) {
  EXPECT(n.value == m.value);
  EXPECT(n.kids.size() == m.kids.size());
  for (std::size_t i = 0; i < m.kids.size(); ++i)
    check_tree(n.kids[i], m.kids[i]);
}

void run_nested(Input& in) {
  Node root(0);
  MNode model;
  while (!in.done()) {
    // Walk down a few levels, as the input says.
    Node* n = &root;
    MNode* m = &model;
    for (int depth = in.byte() % 4; depth > 0 && !m->kids.empty(); --depth) {
      const std::size_t i = in.byte() % m->kids.size();
      n = &n->kids[i];
      m = &m->kids[i];
    }
    std::uint8_t op = in.byte() % 9;
    if (Node::live > 20'000 && (op <= 1 || op == 5 || op == 6)) op = 4;  // copies can double it
    const int v = in.byte();
    const std::size_t size = m->kids.size();
    const std::size_t i = size ? in.byte() % size : 0;
    const std::size_t j = size ? in.byte() % size : 0;
    switch (op) {
      case 0:
      case 1:
        n->kids.emplace_back(v);
        m->kids.push_back(MNode{v, {}});
        break;
      case 2:  // the parent takes its child's children (the child, and so the source, dies)
        if (size) {
          n->kids = std::move(n->kids[i].kids);
          std::vector<MNode> taken = std::move(m->kids[i].kids);
          m->kids = std::move(taken);
        }
        break;
      case 3:  // sibling move: j is left with its value and no children
        if (size) {
          n->kids[i] = std::move(n->kids[j]);
          if (i != j) {
            m->kids[i].value = m->kids[j].value;
            m->kids[i].kids = std::move(m->kids[j].kids);
            m->kids[j].kids.clear();
          }
        }
        break;
      case 4:
        if (size) {
          n->kids.erase(n->kids.begin() + static_cast<std::ptrdiff_t>(i));
          m->kids.erase(m->kids.begin() + static_cast<std::ptrdiff_t>(i));
        }
        break;
      case 5:
        n->kids.insert(n->kids.begin() + static_cast<std::ptrdiff_t>(i), Node(v));
        m->kids.insert(m->kids.begin() + static_cast<std::ptrdiff_t>(i), MNode{v, {}});
        break;
      case 6:  // a copy of one child (an element of the array it is appended to)
        if (size) {
          n->kids.push_back(n->kids[i]);
          m->kids.push_back(m->kids[i]);
        }
        break;
      case 7:  // swap two children's arrays
        if (size) {
          swap(n->kids[i].kids, n->kids[j].kids);
          std::swap(m->kids[i].kids, m->kids[j].kids);
        }
        break;
      case 8:
        if (v % 2) {
          n->kids.clear();
          m->kids.clear();
        } else {
          n->kids.shrink_to_fit();
        }
        break;
    }
    check_tree(root, model);
    EXPECT(Node::live == 1 + count(model));
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
          a.commit(n * 4);
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
  switch (data[0] % 3) {
    case 0:
      run_arena(in);
      break;
    case 1:
      run_array(in);
      EXPECT(Counted::live == 0);
      break;
    default:
      run_nested(in);
      EXPECT(Node::live == 0);
      break;
  }
  return 0;
}
