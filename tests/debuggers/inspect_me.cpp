// The program the debugger tests stop in: one object of each kind the printers know, each in a
// state worth showing. It prints what a debugger must show for each (EXPECT lines, read by
// check_debugger.py) and then calls stop_here(), where the debugger breaks and looks at the
// caller's frame. Built at -O0 -g whatever the build type, so every local stays in memory.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <reservoir/reservoir.hpp>

// The breakpoint: not inlined and not folded away, so the debugger has a frame to break in.
extern "C" __attribute__((noinline)) void stop_here() {
  __asm__ volatile("" ::: "memory");
}

// Stand-ins with the member layouts the printers must also read (the class templates' own
// layouts may move to these): a DynArray whose data is its arena's base (no data_), and a
// ConcurrentDynArray whose arena and atomic counters sit in a nested core_ (no data_). The
// printers match any namespace between reservoir:: and the class name, as for the inline
// namespace of checked iterators, so these are printed as the real ones would be.
namespace reservoir::next_layout {

struct Arena {
  std::byte* base_;
  std::size_t size_;
  std::size_t committed_;
  std::size_t reserved_;
  std::uint32_t granule_units_;
  std::uint16_t max_step_granules_;
  std::uint16_t offset_flags_;
};

template <class T>
struct DynArray {
  T* end_;
  T* cap_;
  std::size_t max_size_;
  Arena arena_;
};

template <class T>
struct ConcurrentDynArray {
  struct Core {
    Arena data_arena_;
    std::atomic<std::size_t> published_;
    std::atomic<std::size_t> capacity_;
  };
  std::size_t max_size_;
  Core core_;
};

}  // namespace reservoir::next_layout

namespace {

template <class Array>
void expect(const char* name, const Array& a, std::size_t capacity) {
  std::printf("EXPECT %s size=%zu capacity=%zu\n", name, static_cast<std::size_t>(a.size()),
              capacity);
}

}  // namespace

int main() {
  reservoir::DynArray<int> ints{0, 10, 20, 30, 40};
  // Long enough to live on the heap, so the string printer follows a pointer.
  reservoir::DynArray<std::string> strings{"alpha", "beta",
                                           "a string longer than any small-string buffer"};
  reservoir::DynArray<int> empty;
  reservoir::DynArray<int> source{1, 2, 3};
  reservoir::DynArray<int> moved_to = std::move(source);
  reservoir::ConcurrentDynArray<int> concurrent(reservoir::max_elements(1000));
  for (int v : {7, 8, 9})
    concurrent.push_back(v);
  reservoir::Arena arena(std::size_t{1} << 20);
  arena.grow(100);

  // The stand-ins, over plain storage: 3 elements of 4 committed, 4 reserved.
  int storage[4] = {5, 6, 7, 0};
  std::byte* const base = reinterpret_cast<std::byte*>(storage);
  const reservoir::next_layout::Arena storage_arena{base, 0, sizeof storage, sizeof storage, 1,
                                                    512,  1};
  reservoir::next_layout::DynArray<int> next_ints{storage + 3, storage + 4, 4, storage_arena};
  reservoir::next_layout::ConcurrentDynArray<int> next_concurrent{4, {storage_arena, {3}, {4}}};
  std::printf("EXPECT next_ints size=3 capacity=4\nEXPECT next_concurrent size=3 capacity=4\n");

  expect("ints", ints, ints.capacity());
  expect("strings", strings, strings.capacity());
  expect("empty", empty, empty.capacity());
  expect("source", source, source.capacity());  // moved-from: empty, no reservation
  expect("moved_to", moved_to, moved_to.capacity());
  expect("concurrent", concurrent, concurrent.capacity());
  std::printf("EXPECT arena size=%zu committed=%zu reserved=%zu granule=%zu\n", arena.size(),
              arena.committed(), arena.reserved(), arena.commit_granule());
#if defined(_LIBCPP_VERSION)
  std::printf("EXPECT stdlib libcxx=1\n");  // gdb has no printer for libc++'s std::string
#endif
  std::fflush(stdout);

  stop_here();
  return ints[2] == 20 && moved_to.size() == 3 && next_ints.end_ == storage + 3 &&
                 next_concurrent.core_.published_.load() == 3
             ? 0
             : 1;
}
