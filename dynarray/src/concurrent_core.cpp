// ConcurrentDynArray's slots, out of line: construction, moves, the contended and the rare paths
// of the claim and publish protocol (solo mode's end, committing more slots, out-of-order
// publishes). What every append runs is inline in detail/concurrent_core.hpp.
#include <reservoir/detail/concurrent_core.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <reservoir/detail/alignment.hpp>
#include <reservoir/detail/spin.hpp>
#include <reservoir/pal.hpp>

namespace reservoir::detail {

std::atomic<std::uint32_t> g_fork_generation{0};

namespace {

// Ready marks must start at zero: never take their reservation from the cache (whose first step
// holds old bytes), so every byte is fresh or decommitted memory, which the OS fills with zeros.
// Their steps are populated when commit_locked asks for it (once blocks finish out of order), so
// that an appender writing a mark takes no page fault: prefault on.
ArenaOptions fresh(ArenaOptions o) noexcept {
  o.reuse_reservation = false;
  o.prefault = true;
  return o;
}

// The data arena is page-granular: its commits are published to readers step by step, and its
// element alignment may exceed a sub-page slot's.
ArenaOptions page_granular(ArenaOptions o) noexcept {
  o.sub_page_slot = false;
  return o;
}

// The bytes to reserve for max_size slots whose first is aligned to `alignment`.
// The messages name `call`, the constructor the user called.
std::size_t data_bytes(std::size_t max_size, std::size_t element_size, std::size_t alignment,
                       const char* call) {
  const std::string prefix = "reservoir::" + std::string(call) + ": ";
  if (max_size == 0) {
    throw std::invalid_argument(prefix + "max_elements must be greater than 0");
  }
  const std::size_t slack = alignment > kMinBaseAlignment ? alignment - kMinBaseAlignment : 0;
  if (max_size > (static_cast<std::size_t>(-1) - slack) / element_size) {
    throw std::length_error(prefix + std::to_string(max_size) + " elements of " +
                            std::to_string(element_size) + " bytes overflow the address space");
  }
  if (max_size > (std::uint64_t{1} << 47)) {  // the claims count in 48 bits (with headroom)
    throw std::length_error(prefix + std::to_string(max_size) +
                            " elements exceed the 2^47 supported");
  }
  return max_size * element_size + slack;
}

// Bumps the fork generation in each child (see fork_generation()). A commit lock is held under
// the generation of the process that took it, so a child can tell a lock that a thread of its
// parent held at the fork (that thread does not exist in the child) from one held by a thread of
// its own.
void count_fork_in_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

// Registers count_fork_in_child once per process. Where registration fails (no memory for it), a
// child forked while a commit was in progress could wait for that commit: docs/api.md says so.
void register_fork_count() noexcept {
  static const bool registered = !pal::at_fork(nullptr, nullptr, &count_fork_in_child);
  (void)registered;
}

// commit_lock_ as a lock, held for one commit step (up to a few milliseconds). Its word is 0 when
// free, otherwise the holder's process stamp (odd, never 0), plus kWaiters once a thread of the
// same process waits for it. Such a waiter sleeps in the OS until the holder lets go
// (pal::wait_while_equal: no spinning on a holder that is not running, whatever the priorities;
// not std::atomic::wait, which can miss a wake on some standard libraries), and only a release
// that finds kWaiters set wakes anyone, so an uncontended commit makes no extra system call. A
// thread that has waited takes the lock with kWaiters set, since others may still sleep. A lock
// held under another stamp was held by a thread of the parent when this process was forked,
// which does not exist here: it is taken over. The commit that thread had begun is made again
// (committing committed pages is harmless).
class CommitLock {
 public:
  explicit CommitLock(std::atomic<std::uint32_t>& word) noexcept : word_(word) {
    const std::uint32_t me = stamp();
    std::uint32_t take = me;
    std::uint32_t held = word_.load(std::memory_order_relaxed);
    for (;;) {
      if ((held & ~kWaiters) != me) {  // free, or left held by a thread not in this process
        if (word_.compare_exchange_weak(held, take, std::memory_order_acquire,
                                        std::memory_order_relaxed))
          return;
        continue;
      }
      if ((held & kWaiters) == 0 &&
          !word_.compare_exchange_weak(held, held | kWaiters, std::memory_order_relaxed,
                                       std::memory_order_relaxed))
        continue;  // it changed: look again
      pal::wait_while_equal(word_, held | kWaiters);
      take = me | kWaiters;
      held = word_.load(std::memory_order_relaxed);
    }
  }
  // Takes the lock only if it is free now (or left held by a thread not in this process).
  struct TryOnly {};
  CommitLock(std::atomic<std::uint32_t>& word, TryOnly) noexcept : word_(word) {
    const std::uint32_t me = stamp();
    std::uint32_t held = word_.load(std::memory_order_relaxed);
    owned_ = (held & ~kWaiters) != me &&
             word_.compare_exchange_strong(held, me, std::memory_order_acquire,
                                           std::memory_order_relaxed);
  }
  ~CommitLock() {
    if (!owned_) return;
    if ((word_.exchange(0, std::memory_order_release) & kWaiters) != 0) pal::wake_all(word_);
  }
  bool owned() const noexcept { return owned_; }
  CommitLock(const CommitLock&) = delete;
  CommitLock& operator=(const CommitLock&) = delete;

 private:
  static constexpr std::uint32_t kWaiters = 2;
  // Odd, without kWaiters, and distinct for 2^30 nested forks (then it repeats, which is taken
  // as never).
  static std::uint32_t stamp() noexcept { return fork_generation() << 2 | 1u; }

  std::atomic<std::uint32_t>& word_;
  bool owned_ = true;
};

}  // namespace

void writer_dropped_unreported(std::size_t count, std::size_t max_size) noexcept {
#if defined(NDEBUG)
  (void)count;
  (void)max_size;
#else
  // The one place the library prints: a checked build stops a silent loss of the user's data.
  std::fprintf(stderr,
               "reservoir::ConcurrentDynArray::Writer destroyed %zu buffered elements it could "
               "not append (max_size() %zu, or the OS refused memory), and no flush() had "
               "reported it: call flush() before the writer's end and handle what it throws "
               "(take_buffered() hands back what did not fit)\n",
               count, max_size);
  std::abort();
#endif
}

ClaimCounts& claim_counts() noexcept {
  static thread_local ClaimCounts counts;
  return counts;
}

bool writer_loss_aborts() noexcept {
#if defined(NDEBUG)
  return false;
#else
  return true;
#endif
}

ConcurrentCore::ConcurrentCore(size_type max_size, size_type element_size, size_type alignment,
                               ArenaOptions options, const char* call)
    : data_arena_(detail::make_arena(data_bytes(max_size, element_size, alignment, call),
                                     page_granular(options), call)),
      ready_arena_(detail::make_arena(max_size, fresh(options), call)),
      max_size_(max_size) {
  ready_ = reinterpret_cast<unsigned char*>(ready_arena_.base());
  const auto base = reinterpret_cast<std::uintptr_t>(data_arena_.base());
  data_offset_ =
      static_cast<std::uint32_t>(alignment > kMinBaseAlignment ? -base & (alignment - 1) : 0);
  if (pal::process_barrier_supported()) mode_.store(kSolo, std::memory_order_relaxed);
  register_fork_count();
}

void ConcurrentCore::take(ConcurrentCore& other) noexcept {
  data_arena_ = std::move(other.data_arena_);
  ready_arena_ = std::move(other.ready_arena_);
  max_size_ = std::exchange(other.max_size_, 0);
  ready_ = std::exchange(other.ready_, nullptr);
  data_offset_ = std::exchange(other.data_offset_, 0);
  solo_end_ = std::exchange(other.solo_end_, 0);
  dropped_.store(other.dropped_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  solo_claimed_.store(other.solo_claimed_.exchange(0, std::memory_order_relaxed),
                      std::memory_order_relaxed);
  claimed_.store(other.claimed_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  published_.store(other.published_.exchange(0, std::memory_order_relaxed),
                   std::memory_order_relaxed);
  capacity_.store(other.capacity_.exchange(0, std::memory_order_relaxed),
                  std::memory_order_relaxed);
  out_of_order_.store(other.out_of_order_.exchange(false, std::memory_order_relaxed),
                      std::memory_order_relaxed);
  mode_.store(other.mode_.exchange(kShared, std::memory_order_relaxed), std::memory_order_relaxed);
  ahead_refused_at_.store(other.ahead_refused_at_.exchange(0, std::memory_order_relaxed),
                          std::memory_order_relaxed);
  owner_.store(other.owner_.exchange(nullptr, std::memory_order_relaxed),
               std::memory_order_relaxed);
  runner_.store(other.runner_.exchange(nullptr, std::memory_order_relaxed),
                std::memory_order_relaxed);
}

std::optional<ConcurrentCore::size_type> ConcurrentCore::try_claim(
    size_type element_size) noexcept {
  try {
    return claim(element_size);
  } catch (...) {  // length_error, OsAllocationError or a refused barrier: all are "no"
    return std::nullopt;
  }
}

void ConcurrentCore::throw_full() const {
  throw std::length_error("reservoir::ConcurrentDynArray: full at max_size() " +
                          std::to_string(max_size_));
}

void ConcurrentCore::end_solo() {
  // kSolo, or an end begun by a thread of a parent process (which does not exist here).
  std::uint32_t mode = mode_.load(std::memory_order_seq_cst);
  const std::uint32_t mine = revoking_mode();
  if ((mode == kSolo || (is_revoking(mode) && mode != mine)) &&
      mode_.compare_exchange_strong(mode, mine, std::memory_order_seq_cst)) {
    if (const std::error_code ec = revoke()) {
      throw std::system_error(ec,
                              "reservoir::ConcurrentDynArray: a second appending thread "
                              "needs a process-wide memory barrier");
    }
    return;
  }
  (void)wait_while_revoking();
}

std::error_code ConcurrentCore::revoke() noexcept {
  if (const std::error_code ec = pal::process_barrier()) {
    mode_.store(kSolo, std::memory_order_release);
    return ec;
  }
  // A solo claim or publish in progress finishes (the owner's next one sees kRevoking). Then
  // solo_claimed_ counts every solo claim, but perhaps not an append_solo claim stored after
  // the barrier: its owner sees kRevoking and asks solo_claim_counted whether it was counted.
  // Sections counted under another fork generation were a parent's threads': none is in
  // progress here, and solo mode ends with solo_claimed_ as it stands.
  const std::uint32_t generation = fork_generation();
  while (solo_depth_.load(std::memory_order_acquire) != 0 &&
         solo_generation_.load(std::memory_order_acquire) == generation)
    pal::yield_thread();
  solo_end_ = solo_claimed_.load(std::memory_order_relaxed);
  claimed_.store(solo_end_, std::memory_order_seq_cst);
  mode_.store(kShared, std::memory_order_release);
  return {};
}

std::uint32_t ConcurrentCore::wait_while_revoking() noexcept {
  const std::uint32_t mine = revoking_mode();
  for (;;) {
    std::uint32_t mode = mode_.load(std::memory_order_acquire);
    if (!is_revoking(mode)) return mode;
    // Begun in a parent process: its thread is not here to finish it.
    if (mode != mine && mode_.compare_exchange_strong(mode, mine, std::memory_order_seq_cst))
      return revoke() ? kSolo : kShared;
    pal::yield_thread();
  }
}

ConcurrentCore::size_type ConcurrentCore::claim_shared(size_type element_size, size_type n,
                                                       bool partial, size_type* claimed_count) {
  for (;;) {
    std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
    size_type k = n;
    unsigned spins = kFirstBackoff;
    for (;;) {
      // Closed: one-slot claims are being undone after a refused commit or a full array; a
      // block claims nothing meanwhile and reports what closed them.
      if ((word & kClosed) != 0) {
        if (reopen_inherited()) {
          word = claimed_.load(std::memory_order_seq_cst);
          continue;
        }
        throw_closed(element_size, static_cast<size_type>(word & kCountMask));
      }
      const auto i = static_cast<size_type>(word);
      if (partial) {
        k = i < max_size_ ? (std::min)(n, max_size_ - i) : 0;
        if (k == 0) throw_full();
      }
      const size_type cap = capacity_.load(std::memory_order_seq_cst);
      if (i > cap || k > cap - i) break;
      // Strong: a failure means another thread claimed. The marks and published_ carry the
      // elements; seq_cst orders the claim with the capacity loaded (see claim_one_slow).
      if (claimed_.compare_exchange_strong(word, word + k, std::memory_order_seq_cst)) {
        if (claimed_count != nullptr) *claimed_count = k;
        return i;
      }
      ++claim_counts().failed_cas;
      if (spins > kMaxSpin) {
        pal::yield_thread();
      } else {
        for (unsigned spin = 0; spin < spins; ++spin)
          cpu_pause();
        spins *= 2;
      }
      word = claimed_.load(std::memory_order_seq_cst);  // fresh after the wait
    }
    // throws, or capacity_ >= i + k (or another thread did it)
    commit_slots(element_size, static_cast<size_type>(word), k);
  }
}

void ConcurrentCore::note_cut(PaceState& pace, std::uint64_t ticket) noexcept {
  if (pace.unpaced != 0) {
    --pace.unpaced;
    return;
  }
  // After a pause, at most kRunPaid claims by the others (or a ticket not above the last one: a
  // closing) means nobody ran meanwhile: pausing costs this thread and buys nothing.
  const void* const me = thread_token();
  const void* const runner = runner_.load(std::memory_order_relaxed);
  if (pace.paced != 0 && (ticket <= pace.last || ticket - pace.last - 1 <= kRunPaid)) {
    // The turn's holder did not run either (it stopped appending, or appends sparsely): this
    // thread takes the turn, so that threads left without a running holder do not pause in step.
    pace.paced = 0;
    pace.unpaced = kUnpacedCuts;
    ++claim_counts().unpaid;
    if (runner != me) {
      runner_.store(me, std::memory_order_relaxed);
      ++claim_counts().turns;
    }
    return;
  }
  if (runner == me) return;
  if (runner == nullptr || pace.paced >= kPacedTurn) {
    runner_.store(me, std::memory_order_relaxed);
    pace.paced = 0;
    ++claim_counts().turns;
    return;
  }
  const unsigned doublings = (std::min)(
      pace.paced, static_cast<std::uint32_t>(std::bit_width(kMaxSpin / kFirstBackoff) - 1));
  pace.owed = kFirstBackoff << doublings;
  ++pace.paced;
  ++claim_counts().paced;
}

void ConcurrentCore::pay_pace(PaceState& pace) noexcept {
  for (std::uint32_t spin = pace.owed; spin != 0; --spin)
    cpu_pause();
  pace.owed = 0;
}

// One-slot claims past the fast path. Why a claim is never undone once it is below capacity:
// the claims close (kClosed set in claimed_) only under the commit lock, at C = capacity_ then,
// and while they are closed nothing commits (every commit checks kClosed under the lock). A
// closing undoes exactly the one-slot claims at or past C: those made before it whose slot is
// at or past C, and every claim made while closed (it sees kClosed in its own ticket). Each such
// claim leaves (takes 1 off the count), and the last one to leave sets claimed_ back to C, open:
// so the claims reopen only after every undone claim has seen that it was. Blocks never claim
// past capacity (their compare-and-swap checks it first), so no block is at or past C.
// A claim with ticket t < C is kept. For the fast path's check t < cap_before to imply t < C,
// cap_before (loaded before the fetch_add) must not exceed C: capacity_ only grows, its stores
// are seq_cst and made under the lock, and a store after the closing follows it in the single
// total order, which the ticket's fetch_add precedes (it was not closed).
ConcurrentCore::size_type ConcurrentCore::claim_one_slow(size_type element_size,
                                                         std::uint64_t ticket,
                                                         size_type cap_before) {
  ClaimCounts& counts = claim_counts();
  ++counts.single;
  if ((ticket & kClosed) != 0) {  // claimed while closed: undone at once
    // Closed by a thread of a parent process: reopened, and this claim was discarded.
    if (reopen_inherited()) return claim_one(element_size);
    ++counts.refused;
    const auto i = static_cast<size_type>(ticket & kCountMask);
    try {
      throw_closed(element_size, i);
    } catch (...) {
      leave_closed(ticket & kEpochMask);  // after reading why: the claims may close again then
      throw;
    }
  }
  const auto i = static_cast<size_type>(ticket);
  if (i < cap_before) {  // in the headroom: kept; commit the next step before it is needed
    commit_ahead(element_size, cap_before);
    return i;
  }
  ++counts.past_capacity;
  // Kept once capacity_ covers it; undone if the claims are closed while it is past capacity_
  // (then its own closing has not reopened, as it has not left). claimed_ is loaded before
  // capacity_, so that a closing seen is not newer than the capacity compared with.
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  if (i < capacity_.load(std::memory_order_seq_cst)) return i;
  if ((word & kClosed) == 0) {
    const CommitLock lock(commit_lock_);  // asleep while another thread commits
    word = claimed_.load(std::memory_order_seq_cst);
    const size_type cap = capacity_.load(std::memory_order_seq_cst);
    if (i < cap) return i;
    if ((word & kClosed) == 0) {
      // Open and past capacity: commit for every one-slot claim handed out (up to max_size()),
      // or close the claims if that is refused or this slot is past max_size().
      const size_type want = static_cast<size_type>((std::min)(
          static_cast<std::uint64_t>(max_size_), (std::max)(std::uint64_t{i} + 1, word)));
      unsigned char reason = kClosedFull;
      std::error_code error;
      if (want > cap) {
        try {
          commit_locked(element_size, want);
        } catch (const OsAllocationError& e) {
          reason = kClosedRefused;
          error = e.code();
        } catch (...) {  // std::bad_alloc from a message: refused too
          reason = kClosedRefused;
          error = std::make_error_code(std::errc::not_enough_memory);
        }
      }
      if (i < capacity_.load(std::memory_order_seq_cst)) return i;
      word = close_claims(reason, error);
    }
  }
  ++counts.refused;
  try {
    throw_closed(element_size, i);
  } catch (...) {
    leave_closed(word & kEpochMask);  // the closing seen (or made) while past capacity_
    throw;
  }
}

std::uint64_t ConcurrentCore::close_claims(unsigned char reason, std::error_code error) noexcept {
  closed_reason_.store(reason, std::memory_order_relaxed);
  closed_error_value_.store(error.value(), std::memory_order_relaxed);
  closed_error_category_.store(&error.category(), std::memory_order_relaxed);
  closed_at_.store(capacity_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed_generation_.store(fork_generation(), std::memory_order_relaxed);
  // A fresh epoch (an open counter has none): a claim undone by an earlier closing that a child
  // reopened cannot take this one for its own (unless it stalls through 2^15 closings).
  closed_epoch_ = static_cast<std::uint16_t>((closed_epoch_ + 1) & (kEpochMask >> kEpochShift));
  const std::uint64_t epoch = std::uint64_t{closed_epoch_} << kEpochShift;
  // The fields above reach every claim that sees kClosed through claimed_'s release sequence.
  return claimed_.fetch_or(kClosed | epoch, std::memory_order_seq_cst) | kClosed | epoch;
}

void ConcurrentCore::leave_closed(std::uint64_t epoch) noexcept {
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  do {
    // Reopened without this claim (reopen_inherited discarded it): nothing to undo.
    if ((word & (kClosed | kEpochMask)) != (kClosed | epoch)) return;
  } while (!claimed_.compare_exchange_weak(word, word - 1, std::memory_order_seq_cst));
  --word;
  // The last undone claim to leave reopens. A failed exchange means another claim came (it is
  // undone, and will leave and check in turn).
  const std::uint64_t reopen = closed_at_.load(std::memory_order_relaxed);
  if (word == (kClosed | epoch | reopen))
    (void)claimed_.compare_exchange_strong(word, reopen, std::memory_order_seq_cst);
}

bool ConcurrentCore::reopen_inherited() noexcept {
  if (closed_generation_.load(std::memory_order_relaxed) == fork_generation()) return false;
  const CommitLock lock(commit_lock_);
  std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  while ((word & kClosed) != 0) {
    // Closed in this process since (under the lock, which this thread now holds): its own.
    if (closed_generation_.load(std::memory_order_relaxed) == fork_generation()) return false;
    // The claims made here meanwhile are discarded with the parent's: they see the counter open
    // or under another epoch, and do not leave.
    if (claimed_.compare_exchange_weak(word, closed_at_.load(std::memory_order_relaxed),
                                       std::memory_order_seq_cst))
      break;
  }
  return true;
}

void ConcurrentCore::throw_closed(size_type element_size, size_type i) const {
  if (closed_reason_.load(std::memory_order_relaxed) != kClosedRefused) throw_full();
  const std::error_category* const category =
      closed_error_category_.load(std::memory_order_relaxed);
  const std::error_code error(closed_error_value_.load(std::memory_order_relaxed),
                              category != nullptr ? *category : std::generic_category());
  throw OsAllocationError("commit", element_size,
                          static_cast<const std::byte*>(data()) + i * element_size, error,
                          "the commit this ConcurrentDynArray needed for the slot was refused; "
                          "nothing was appended");
}

void ConcurrentCore::commit_ahead(size_type element_size, size_type cap_before) noexcept {
  if (capacity_.load(std::memory_order_relaxed) != cap_before ||
      commit_lock_.load(std::memory_order_relaxed) != 0 || cap_before >= max_size_ ||
      ahead_refused_at_.load(std::memory_order_relaxed) == cap_before)
    return;  // committed since, being committed, nothing left, or refused at this capacity
  const CommitLock lock(commit_lock_, CommitLock::TryOnly{});
  if (!lock.owned()) return;  // another thread is committing: it never waits for it
  ++claim_counts().commits_ahead;
  if (capacity_.load(std::memory_order_relaxed) != cap_before ||
      (claimed_.load(std::memory_order_seq_cst) & kClosed) != 0)
    return;
  try {
    commit_locked(element_size, cap_before + 1);  // the arenas commit a whole step
  } catch (...) {  // refused: the claim that needs it will meet the refusal itself
    ahead_refused_at_.store(cap_before, std::memory_order_relaxed);
  }
}

void ConcurrentCore::commit_slots(size_type element_size, size_type i, size_type n) {
  const CommitLock lock(commit_lock_);
  const size_type cap = capacity_.load(std::memory_order_relaxed);
  if (i <= cap && n <= cap - i) return;  // another thread did it
  if (i > max_size_ || n > max_size_ - i) throw_full();
  const std::uint64_t word = claimed_.load(std::memory_order_seq_cst);
  if ((word & kClosed) != 0) throw_closed(element_size, i);  // nothing commits while closed
  commit_locked(element_size, i + n);
}

void ConcurrentCore::commit_locked(size_type element_size, size_type end) {
  // Both arenas reach their step ends; the capacity is what both can hold. Ready bytes come
  // from fresh or decommitted memory, so they read as zero (not ready).
  if (end > max_size_) throw_full();
  data_arena_.commit(data_offset_ + end * element_size);  // strong guarantee on failure
  const size_type data_cap =
      (std::min)((data_arena_.committed() - data_offset_) / element_size, max_size_);
  // The marks are written only when blocks finish out of order, so while one thread appends
  // alone their pages are never touched and cost no RAM and no faults: commit them without
  // prefault. Once a block has finished out of order, more marks will be written, and the new
  // pages are backed here in one call rather than by a page fault in an appending thread.
  const auto populate =
      out_of_order_.load(std::memory_order_relaxed) ? Arena::Populate::all : Arena::Populate::none;
  // On failure data_arena_ keeps a step: harmless, unclaimed.
  ready_arena_.commit(data_cap, populate);
  const size_type flags = (std::min)(ready_arena_.committed(), max_size_);
  // No thread reads a mark at or above the old capacity before the release store below
  // publishes it.
  capacity_.store((std::min)(data_cap, flags), std::memory_order_seq_cst);
}

ConcurrentCore::size_type ConcurrentCore::advance_published(size_type p) const noexcept {
  // Marks below capacity_ are committed, and those of unclaimed slots read 0.
  const size_type q = ready_run_end(p, capacity_.load(std::memory_order_acquire));
  if (q == p) return p;
  // published_ only grows, and every value it takes is a prefix of ready slots: move it to q
  // unless another thread has moved it as far already (a lost CAS means it moved: bounded).
  size_type current = p;
  while (current < q && !published_.compare_exchange_weak(current, q, std::memory_order_acq_rel,
                                                          std::memory_order_acquire)) {
  }
  return (std::max)(current, q);
}

}  // namespace reservoir::detail
