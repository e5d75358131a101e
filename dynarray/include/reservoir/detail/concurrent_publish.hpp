// reservoir/detail/concurrent_publish.hpp - ConcurrentCore's publishes and size(), inline part:
// a store of published_ when a block is next, ready marks otherwise, and the walk over them.
// advance_published, which moves published_ over them, is in src/concurrent_publish.cpp.
//
// Ready bytes mark blocks, not elements: a block [i, i + n) is split into power-of-two pieces
// (largest first), and the byte at each piece's first index holds log2(piece length) + 1; the
// other bytes stay 0. The published prefix only ever ends at a block's or a piece's end, so a walk
// reads only the bytes where pieces start, and skips a whole piece per byte. A block published
// `each` (append_with) is marked as pieces of one element, a byte per index, so that
// is_published finds every element of it.
#pragma once

#include <atomic>
#include <bit>

#include <reservoir/detail/atomic_byte.hpp>
#include <reservoir/detail/concurrent_core.hpp>
#include <reservoir/detail/concurrent_solo.hpp>

namespace reservoir::detail {

inline void ConcurrentCore::publish(size_type i, size_type n, bool each) noexcept {
  const Section section(*this, Section::ForPublish{});
  if (section.solo()) {
    publish_solo(i, n, each);
  } else {
    publish_shared(i, n, each);
  }
}

// Below published_, or marked: a mark is stored (release) only after its piece is constructed, and
// is never cleared while the array lives. Marks are read only below capacity_ (committed).
inline bool ConcurrentCore::is_published(size_type i) const noexcept {
  if (i < published_.load(std::memory_order_acquire)) return true;
  return i < capacity_.load(std::memory_order_acquire) && load_mark(i) != 0;
}

// Reads the marks only below capacity_ (committed; the marks of unclaimed indices are 0).
inline ConcurrentCore::size_type ConcurrentCore::size() const noexcept {
  const size_type p = published_.load(std::memory_order_acquire);
  if (p == capacity_.load(std::memory_order_acquire) || load_mark(p) == 0) return p;
  return advance_published(p);
}

// Publishes [i, i + n) without a read-modify-write. When published_ is i (the block is next) a
// release store moves it past the block: nobody else can move it from i, as other threads move it
// only over ready marks and this block has none. Otherwise the block is marked ready (release
// stores), for size() or a later append to find; a marked block that crosses a multiple of
// kAdvanceStride also advances published_, which bounds what size() walks when blocks keep
// finishing out of order.
inline void ConcurrentCore::publish_shared(size_type i, size_type n, bool each) noexcept {
  // Acquire: the store below then carries the earlier blocks' publication too (a plain store
  // would otherwise end the release sequence of whoever published them).
  if (published_.load(std::memory_order_acquire) == i) {
    published_.store(i + n, std::memory_order_release);
    wake_waiters();
    return;
  }
  mark_ready(i, n, each);
  wake_waiters();
  if ((i + n) / kAdvanceStride != i / kAdvanceStride)
    (void)advance_published(published_.load(std::memory_order_acquire));
}

// Marks [i, i + n) ready, one byte per piece, or with `each` one per index (see the top of this
// file).
inline void ConcurrentCore::mark_ready(size_type i, size_type n, bool each) noexcept {
  if (!out_of_order_.load(std::memory_order_relaxed))
    out_of_order_.store(true, std::memory_order_relaxed);
  if (each) {
    for (unsigned char *mark = ready_ + i, *end = mark + n; mark != end; ++mark)
      store_byte_release(mark, 1);
    return;
  }
  for (size_type left = n; left != 0;) {
    const size_type piece = std::bit_floor(left);
    store_byte_release(ready_ + i, static_cast<unsigned char>(std::bit_width(piece)));
    i += piece;
    left -= piece;
  }
}

// The marks are plain bytes, only ever accessed atomically. unsigned char is an implicit-lifetime
// type, and the OS's zero-filled pages hold such objects without a write (as memory from malloc
// does), so a mark needs no construction and its page costs no RAM until a mark on it is set
// (size() reads the mark after the prefix: a read maps no RAM).
inline unsigned char ConcurrentCore::load_mark(size_type i) const noexcept {
  return load_byte_acquire(ready_ + i);
}

// The end of the ready pieces that follow one another from index p (p itself if its mark is 0),
// reading marks below `end` (claimed or committed indices) only.
inline ConcurrentCore::size_type ConcurrentCore::ready_end(size_type p,
                                                           size_type end) const noexcept {
  while (p < end) {
    const unsigned char mark = load_mark(p);
    if (mark == 0) break;
    p += size_type{1} << (mark - 1);
  }
  return p;
}

}  // namespace reservoir::detail
