// reservoir/detail/concurrent_writer.hpp - ConcurrentDynArray<T>::Writer: appends for one thread,
// gathered in its own buffer and appended as blocks. Included by
// <reservoir/concurrent_dynarray.hpp> after the class, whose contract (at its top) covers the
// Writer's publish point and losses; include that header, never this one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace reservoir {

template <class T>
class ConcurrentDynArray<T>::Writer {
 public:
  // Takes other's buffered elements; other stays a usable writer of the same array, with an
  // empty buffer.
  Writer(Writer&& other) noexcept
      : array_(other.array_),
        buffer_(std::exchange(other.buffer_, {})),
        head_(std::exchange(other.head_, 0)),
        block_(std::exchange(other.block_, 0)),
        reported_(std::exchange(other.reported_, 0)),
        on_loss_(other.on_loss_) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  Writer& operator=(Writer&&) = delete;

  // Flushes. Buffered elements that the flush cannot append (the array is full, or the OS
  // refuses memory or the barrier) are never lost silently: where no flush() had thrown for
  // them (the program was never told), a writer made with WriterLoss::abort (the default)
  // prints which array, how many and why to stderr and aborts, in every build; otherwise they
  // are destroyed and counted in the array's dropped(). Call flush() before a writer's end and
  // handle what it throws (take_buffered() hands back what did not fit) to decide instead.
  ~Writer() {
    const size_type before = buffered();
    if (before == 0) return;
    const size_type told = (std::min)(reported_, before);  // the oldest `told` of them
    try {
      flush_as("~Writer");
      return;
    } catch (const std::length_error&) {  // full: the message says so from max_size()
      lose(before, told, nullptr);
    } catch (const std::exception& e) {  // OsAllocationError or std::system_error
      lose(before, told, e.what());
    } catch (...) {
      lose(before, told, "an unknown exception");
    }
  }

  // Adds an element to the buffer, flushing it first if it is full; the element has no index
  // and is not visible until the next flush. Throws what that flush throws (std::length_error
  // when the array is full: the elements that fit were appended, the rest stay buffered;
  // OsAllocationError; std::system_error), and whatever constructing T throws; the new element
  // is not added then.
  // Amortized cost: a compare and a construction in the writer's own buffer, plus one move per
  // element and one claim per buffer at the flush.
  template <class... Args>
  void emplace_back(Args&&... args) {
    if (buffer_.size() == block_) make_room("Writer::push_back/emplace_back");
    buffer_.emplace_back(std::forward<Args>(args)...);  // fits: never reallocates
  }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }

  // The publish point: appends the buffered elements to the array as one block of consecutive
  // indices claimed with one atomic operation, and returns the block's first index (max_size()
  // when nothing was buffered). After it returns they are published: counted by size() and
  // visible to every reader. When fewer indices are left than elements buffered, appends those
  // that fit (oldest first), keeps the rest buffered and throws std::length_error; when the OS
  // refuses to commit (OsAllocationError) or the barrier that ends solo mode
  // (std::system_error), appends nothing and keeps them all.
  size_type flush() { return flush_as("Writer::flush"); }

  // Makes room for n more elements: the next n push_backs and emplace_backs add to the buffer
  // and none of them flushes, so that they reach the array in one flush(), at the moment the
  // program chooses (a memo filled in order flushes each block once the array holds every
  // element before it). Later buffers are at least as long. Throws std::length_error if
  // buffered() + n is more than max_size() (no flush could append them all) and std::bad_alloc
  // if the buffer cannot grow; nothing changes then.
  void reserve(size_type n) {
    const size_type pending = buffered();
    if (n > array_->max_size() || pending > array_->max_size() - n) {
      throw std::length_error(
          "reservoir::ConcurrentDynArray::Writer::reserve: " + std::to_string(pending) +
          " buffered and " + std::to_string(n) + " more are more than max_size() " +
          std::to_string(array_->max_size()));
    }
    if (buffer_.size() + n <= block_) return;
    // Never shorter than the block already promised: after a partial flush (head_ > 0) the
    // room asked for may fit in the block though not behind the flushed elements' slots.
    const size_type length = (std::max)(block_, pending + n);
    std::vector<T> longer;
    longer.reserve(length);  // throws: nothing changed
    for (auto it = buffer_.begin() + static_cast<std::ptrdiff_t>(head_); it != buffer_.end(); ++it)
      longer.push_back(std::move(*it));  // nothrow: reserved, T nothrow move constructible
    buffer_ = std::move(longer);
    head_ = 0;
    block_ = length;
  }

  // Elements appended to this writer and not yet flushed.
  size_type buffered() const noexcept { return buffer_.size() - head_; }

  // Hands the buffered elements back, oldest first, and leaves the writer empty and usable:
  // for the elements a flush() could not append (the array is full). Throws std::bad_alloc
  // (nothing taken) if the returned vector cannot be allocated.
  std::vector<T> take_buffered() {
    std::vector<T> out;
    out.reserve(buffered());
    for (auto it = buffer_.begin() + static_cast<std::ptrdiff_t>(head_); it != buffer_.end(); ++it)
      out.push_back(std::move(*it));  // nothrow: reserved, T nothrow move constructible
    buffer_.clear();
    head_ = 0;
    reported_ = 0;
    return out;
  }

 private:
  friend class ConcurrentDynArray;
  Writer(ConcurrentDynArray& array, WriterLoss on_loss) noexcept
      : array_(&array), on_loss_(on_loss) {}

  // flush(), its messages naming `call` (the user's call that flushed).
  size_type flush_as(const char* call) {
    const size_type pending = buffer_.size() - head_;
    if (pending == 0) return array_->max_size();
    size_type count = 0;
    size_type first = 0;
    try {
      first = array_->claim(call, pending, true, &count);  // throws: none taken
    } catch (...) {
      reported_ = pending;  // the program was told about every buffered element
      throw;
    }
    std::uninitialized_move_n(buffer_.begin() + static_cast<std::ptrdiff_t>(head_), count,
                              array_->elements() + first);  // nothrow
    array_->core_.publish(first, count);
    if (count == pending) {
      buffer_.clear();
      head_ = 0;
      reported_ = 0;
      return first;
    }
    // The rest stays buffered after the moved-from ones (no assignment: T need not have one).
    head_ += count;
    reported_ = pending - count;
    throw std::length_error(std::string("reservoir::ConcurrentDynArray::") + call +
                            ": full at max_size() " + std::to_string(array_->max_size()) +
                            ": appended " + std::to_string(count) + " of " +
                            std::to_string(pending) + " buffered elements at index " +
                            std::to_string(first) + ", the rest stay buffered");
  }

  // The end of ~Writer whose flush threw: the oldest (before - buffered()) were appended, the
  // rest are lost, and those past the oldest `told` were never reported. `why` as
  // detail::writer_lost_abort's.
  void lose(size_type before, size_type told, const char* why) noexcept {
    const size_type lost = buffered();
    const size_type unreported = (std::min)(lost, before - told);
    if (unreported != 0 && on_loss_ == WriterLoss::abort)
      detail::writer_lost_abort(array_, unreported, array_->max_size(), why);
    array_->core_.count_dropped(lost);
  }

  // The buffer is full (or not allocated yet): flush it, then let the next block be twice as
  // long, from 16 elements up to 16 KiB of them (or the length reserve() gave it, if longer),
  // never longer than the array.
  void make_room(const char* call) {
    flush_as(call);
    constexpr size_type kFirst = 16, kMaxBytes = 16 * 1024;
    const size_type longest = (std::max)(size_type{1}, kMaxBytes / sizeof(T));
    size_type next = block_ == 0 ? (std::min)(kFirst, longest) : (std::min)(block_ * 2, longest);
    next = (std::min)(next, array_->max_size());
    if (next == 0) array_->core_.throw_full(call);  // an array with no reservation
    if (next > block_) {
      buffer_.reserve(next);  // empty after the flush: nothing moves
      block_ = next;
    }
  }

  ConcurrentDynArray* array_;
  std::vector<T> buffer_;  // [head_, size()) buffered; before head_: moved into the array
  size_type head_ = 0;
  size_type block_ = 0;  // flush when the buffer holds this many
  // The oldest buffered elements the program was told about: those a flush() kept when it threw
  // (elements added since were not reported).
  size_type reported_ = 0;
  WriterLoss on_loss_ = WriterLoss::abort;
};

}  // namespace reservoir
