// pal for POSIX systems: Linux, macOS and FreeBSD. The memory calls, sizes, errors and threads;
// their differences are the marked #if blocks (RESERVOIR_PAL_LINUX: Linux's own paths, see
// pal_posix_internal.hpp). What each OS reads of its memory and limits, and how it sleeps on a
// word, are in the other files CMakeLists.txt chooses.
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <string>

#include "pal_posix_internal.hpp"

// A ThreadSanitizer build (GCC says __SANITIZE_THREAD__, clang __has_feature).
#if defined(__SANITIZE_THREAD__)
#define RESERVOIR_PAL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RESERVOIR_PAL_TSAN 1
#endif
#endif

#if defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__APPLE__)
#include <mach/vm_param.h>
#elif defined(__FreeBSD__)
#include <sys/sysctl.h>
#endif

namespace reservoir::pal {

// ---- sizes -------------------------------------------------------------------------------------

namespace {
std::atomic<std::size_t> g_os_page_size{0};  // 0: not asked yet
}  // namespace

std::size_t detail::os_page_size() noexcept {
  std::size_t size = g_os_page_size.load(std::memory_order_relaxed);
  if (size == 0) {
    const long v = ::sysconf(_SC_PAGESIZE);
    size = v > 0 ? static_cast<std::size_t>(v) : static_cast<std::size_t>(::getpagesize());
    g_os_page_size.store(size, std::memory_order_relaxed);
  }
  return size;
}

std::size_t page_size() noexcept {
  if (std::size_t forced = detail::page_size_override()) return forced;
  return os_page_size();
}

std::size_t allocation_granularity() noexcept {
  return page_size();
}

// ---- address space -----------------------------------------------------------------------------

#if !defined(__APPLE__)
namespace {
std::atomic<std::uintptr_t> g_user_stack_top{0};  // 0: not asked yet

// An address in the process's initial stack, near its top: on Linux the auxiliary vector's
// AT_RANDOM bytes, which the kernel puts there at exec; on FreeBSD the stack's top (kern.usrstack).
// 0 where neither answers.
std::uintptr_t user_stack_top() noexcept {
  std::uintptr_t top = g_user_stack_top.load(std::memory_order_relaxed);
  if (top != 0) return top;
#if defined(__linux__)
  top = static_cast<std::uintptr_t>(::getauxval(AT_RANDOM));
#elif defined(__FreeBSD__)
  int mib[2] = {CTL_KERN, KERN_USRSTACK};
  unsigned long usrstack = 0;
  std::size_t len = sizeof usrstack;
  if (::sysctl(mib, 2, &usrstack, &len, nullptr, 0) == 0 && len == sizeof usrstack) {
    top = static_cast<std::uintptr_t>(usrstack - 1);
  }
#endif
  if (top != 0) g_user_stack_top.store(top, std::memory_order_relaxed);
  return top;
}
}  // namespace
#endif

std::size_t address_space_size() noexcept {
#if defined(__APPLE__)
  // Darwin says where user space ends (128 TiB on macOS, 63 GiB on iOS). Its arm64 main stack
  // sits far below that (USRSTACK64: 0x16fe00000), so the stack cannot tell.
  std::size_t size = static_cast<std::size_t>(
      std::min<std::uint64_t>(MACH_VM_MAX_ADDRESS, std::numeric_limits<std::size_t>::max()));
#else
  // The process's initial stack sits just below the top of the user address space on Linux and
  // FreeBSD. The calling thread's own stack may be anywhere (pthread_attr_setstack), so it is not
  // asked.
  // Where the OS does not say, the calling thread's stack stands in.
  int probe = 0;
  std::uintptr_t top = user_stack_top();
  if (top == 0) top = reinterpret_cast<std::uintptr_t>(&probe);
  std::size_t size = top < (std::uintptr_t{1} << (sizeof(std::uintptr_t) * 8 - 1))
                         ? static_cast<std::size_t>(std::bit_ceil(top + 1))
                         : static_cast<std::size_t>(top);
#endif
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      static_cast<std::size_t>(lim.rlim_cur) < size) {
    size = static_cast<std::size_t>(lim.rlim_cur);
  }
#if defined(RESERVOIR_PAL_TSAN)
  // ThreadSanitizer keeps most of the address space for its shadow and refuses the program
  // mappings outside its application ranges (x86-64: about 2 TiB, part of it taken by where ASLR
  // puts the first mapping): count 1 TiB, so that the budget is half of that.
  size = std::min(size, std::size_t{1} << 40);
#endif
  return size ? size : 1;
}

namespace {
// madvise(advice) on Linux, counted (and failed on a test's request) as `op`; not_supported on
// the other systems and where this system's headers lack the advice (advice < 0).
std::error_code linux_advice(Op op, void* addr, std::size_t size, int advice) noexcept {
  std::error_code ec;
  if (injected_failure(op, &ec)) return ec;
#if RESERVOIR_PAL_LINUX
  if (advice >= 0) {
    if (::madvise(addr, size, advice) != 0) return last_error();
    return {};
  }
#endif
  (void)addr;
  (void)size;
  (void)advice;
  return std::make_error_code(std::errc::not_supported);
}

// An anonymous private mapping of `size` bytes with `prot` and `flags` added (fd -1 with MAP_ANON:
// FreeBSD rejects anything else), its base aligned to page_size(). Where a test forces a page
// size larger than the OS's, one page more is mapped, then its ends given back around the aligned
// base, as the OS would align with pages that large (unmapping whole OS pages of our own fresh
// mapping cannot fail).
std::error_code map_anonymous(std::size_t size, int prot, int flags, void** out) noexcept {
  const std::size_t align = page_size();
  const std::size_t extra = detail::page_size_override() ? align : 0;
  void* p = ::mmap(nullptr, size + extra, prot, MAP_PRIVATE | MAP_ANON | flags, -1, 0);
  if (p == MAP_FAILED) return last_error();  // MAP_FAILED, not nullptr
  if (extra) {
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (start + align - 1) / align * align;
    if (aligned > start) (void)::munmap(p, aligned - start);
    const std::uintptr_t end = start + size + extra;
    if (end > aligned + size)
      (void)::munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
    p = reinterpret_cast<void*>(aligned);
  }
  *out = p;
  return {};
}
}  // namespace

std::error_code reserve(std::size_t size, void** out) noexcept {
  std::error_code ec;
  if (injected_failure(Op::reserve, &ec)) return ec;
  int flags = 0;
#if RESERVOIR_PAL_LINUX
  // Linux: no swap/commit accounting for the reservation. Only here: FreeBSD never implemented
  // MAP_NORESERVE and removed it in 11 (older headers still define the bit, so the
  // build must leave it out itself), and macOS has no commit limit for it to matter to.
  flags |= MAP_NORESERVE;
#endif
  return map_anonymous(size, PROT_NONE, flags, out);
}

std::error_code reserve_without_huge_pages(std::size_t size, void** out) noexcept {
  const std::error_code ec = reserve(size, out);
#if RESERVOIR_PAL_LINUX && defined(MADV_NOHUGEPAGE)
  if (!ec) (void)::madvise(*out, size, MADV_NOHUGEPAGE);
#endif
  return ec;
}

std::error_code commit(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::commit, &ec)) return ec;
  if (::mprotect(addr, size, PROT_READ | PROT_WRITE) != 0) return last_error();
  return {};
}

std::error_code decommit(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::decommit, &ec)) return ec;
#if RESERVOIR_PAL_LINUX
  // Drop the pages first (they read as zeros afterwards), then remove access so a stale pointer
  // faults. Reversed, a failed madvise would leave data we promised gone behind PROT_NONE.
  if (::madvise(addr, size, MADV_DONTNEED) != 0) return last_error();
  if (::mprotect(addr, size, PROT_NONE) != 0) return last_error();
  return {};
#else
  // macOS and FreeBSD: MADV_DONTNEED is only a hint and does not zero. Map a fresh inaccessible
  // anonymous range over the old one instead: the pages are freed and later read as zeros.
  void* p = MAP_FAILED;
  if (injected_failure(Op::remap, &ec)) {
    // ENOMEM stands for the worst a failed MAP_FIXED may leave: the old mapping removed, a hole.
    // Any other injected error leaves the mapping as it was.
    if (ec == std::errc::not_enough_memory) (void)::munmap(addr, size);
  } else {
    p = ::mmap(addr, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANON, -1, 0);
    if (p != MAP_FAILED) return {};
    ec = last_error();
  }
  // POSIX lets a failed MAP_FIXED remove the old mapping, leaving a hole that another mmap could
  // take while the arena still counts the range as its own. So find out whether the range is
  // still mapped: mprotect succeeds only over mapped pages, and read-write is the state of a
  // committed range already, so the probe changes nothing. If it is mapped, the pages are handed
  // back to the OS (contents unspecified, as on any failed decommit) but stay accessible: the
  // caller, told of the failure, keeps counting them as committed.
  if (::mprotect(addr, size, PROT_READ | PROT_WRITE) == 0) {
#if defined(MADV_FREE)
    (void)::madvise(addr, size, MADV_FREE);
#else
    (void)::madvise(addr, size, MADV_DONTNEED);
#endif
    return ec;
  }
  // A hole: map it again. Not with MAP_FIXED, which would replace whatever another thread may
  // have mapped there meanwhile: ask for the address as a hint and keep the result only if it is
  // exactly the hole.
  p = ::mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANON, -1, 0);
  if (p == addr) return {};  // the hole is ours again, PROT_NONE and zero: decommitted
  if (p != MAP_FAILED) (void)::munmap(p, size);
  return ec;
#endif
}

#if RESERVOIR_PAL_LINUX
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13 uapi value; older headers lack it
#endif
#ifndef MADV_DONTDUMP
#define MADV_DONTDUMP 16  // Linux 3.4 uapi value; a kernel without it refuses it (EINVAL)
#endif
namespace {
// 1: the kernel takes MADV_GUARD_INSTALL; 0: it does not (EINVAL: before 6.13); -1: not asked yet.
std::atomic<int> g_guard_install{-1};
}  // namespace
#endif

std::error_code reserve_open([[maybe_unused]] std::size_t size,
                             [[maybe_unused]] void** out) noexcept {
#if RESERVOIR_PAL_LINUX
  if (testing::open_reservations_refused()) return std::make_error_code(std::errc::not_supported);
  // Strict overcommit charges a writable private mapping in full, MAP_NORESERVE or not. Read at
  // every call (reservations are rare): the setting can change while the process runs.
  {
    char buf[16];
    if (!read_small_file("/proc/sys/vm/overcommit_memory", buf, sizeof buf) || buf[0] == '2') {
      return std::make_error_code(std::errc::not_supported);
    }
  }
  // A finite data limit (RLIMIT_DATA) counts a writable private mapping in full, touched or not,
  // and locked memory (mlockall(MCL_FUTURE) or mlock: locked pages in VmLck are the sign that can
  // be read) would have the kernel back all of it at once.
  struct rlimit data{};
  if (::getrlimit(RLIMIT_DATA, &data) != 0 || data.rlim_cur != RLIM_INFINITY ||
      read_proc_kib("/proc/self/status", "VmLck") != 0) {
    return std::make_error_code(std::errc::not_supported);
  }
  std::error_code ec;
  if (injected_failure(Op::reserve, &ec)) return ec;
  void* p = nullptr;
  if ((ec = map_anonymous(size, PROT_READ | PROT_WRITE, MAP_NORESERVE, &p))) return ec;
#if defined(MADV_NOHUGEPAGE)
  // Transparent huge pages in `always` mode would back a first touch anywhere in the range with
  // 2 MiB. A hint the kernel may not know (no THP built in): its refusal changes nothing.
  (void)::madvise(p, size, MADV_NOHUGEPAGE);
#endif
  // Out of core dumps: the kernel dumps a written private mapping whole, a page at a time, so
  // terabytes of untouched range would cost a crashing process minutes and its core terabytes
  // (docs/address-space.md). Where the advice is refused the range is not made open.
  if (testing::dontdump_refused() || ::madvise(p, size, MADV_DONTDUMP) != 0) {
    (void)::munmap(p, size);
    return std::make_error_code(std::errc::not_supported);
  }
  *out = p;
  return {};
#else
  return std::make_error_code(std::errc::not_supported);  // no open reservations here
#endif
}

std::error_code guard([[maybe_unused]] void* addr, [[maybe_unused]] std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::guard, &ec)) return ec;
#if RESERVOIR_PAL_LINUX
  if (g_guard_install.load(std::memory_order_relaxed) != 0 && !testing::guard_install_refused()) {
    if (::madvise(addr, size, MADV_GUARD_INSTALL) == 0) {
      g_guard_install.store(1, std::memory_order_relaxed);
      return {};
    }
    if (errno != EINVAL) return last_error();
    g_guard_install.store(0, std::memory_order_relaxed);  // a kernel before 6.13
  }
  if (::mprotect(addr, size, PROT_NONE) != 0) return last_error();
  return {};
#else
  return std::make_error_code(std::errc::not_supported);  // guard() serves open reservations
#endif
}

std::error_code discard(void* addr, std::size_t size) noexcept {
  return linux_advice(Op::decommit, addr, size, MADV_DONTNEED);
}

bool testing::decommit_remaps() noexcept {
  return !RESERVOIR_PAL_LINUX;
}

std::error_code release(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::release, &ec)) return ec;
  if (::munmap(addr, size) != 0) return last_error();
  return {};
}

std::error_code prefault(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (!injected_failure(Op::prefault, &ec)) {
#if RESERVOIR_PAL_LINUX
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 uapi value; older headers lack it
#endif
    if (::madvise(addr, size, MADV_POPULATE_WRITE) == 0) return {};
    ec = last_error();
#else
    (void)addr;
    (void)size;
    return std::make_error_code(std::errc::not_supported);
#endif
  }
  // The call itself refused, not the memory: EINVAL (a kernel before 5.14 lacks the advice),
  // EPERM or ENOSYS (a seccomp filter that does not allow it). Nothing was populated, and the
  // caller's stores back the pages instead. An injected error is judged as the OS's would be.
  if (ec == std::errc::invalid_argument || ec == std::errc::operation_not_permitted ||
      ec == std::errc::function_not_supported) {
    return std::make_error_code(std::errc::not_supported);
  }
  return ec;
}

// The huge-page advice, or -1 where this system's headers lack it (linux_advice: not supported).
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
constexpr int kAdviseHuge = MADV_HUGEPAGE;
constexpr int kAdviseNoHuge = MADV_NOHUGEPAGE;
#else
constexpr int kAdviseHuge = -1;
constexpr int kAdviseNoHuge = -1;
#endif

std::error_code advise_huge_pages(void* addr, std::size_t size) noexcept {
  return linux_advice(Op::advise, addr, size, kAdviseHuge);
}

std::error_code unadvise_huge_pages(void* addr, std::size_t size) noexcept {
  return linux_advice(Op::advise, addr, size, kAdviseNoHuge);
}

// ---- threads -----------------------------------------------------------------------------------

void yield_thread() noexcept {
  (void)::sched_yield();  // cannot fail on Linux, macOS or FreeBSD
}

namespace {
// The poll of wait_while_equal where it cannot sleep on the word itself.
constexpr long kWordPollMicroseconds = 50;
}  // namespace

void detail::sleep_word_poll() noexcept {
  timespec interval{0, kWordPollMicroseconds * 1000};
  (void)::nanosleep(&interval, nullptr);  // EINTR only ends the sleep early: the caller re-checks
}

// ---- per-thread values --------------------------------------------------------------------------

// pthread key destructors run at thread exit with the value already cleared; glibc runs them after
// the thread's C++ thread_local destructors.
std::error_code create_thread_key(ThreadExitFn on_exit, ThreadKey* out) noexcept {
  pthread_key_t key;
  if (int e = ::pthread_key_create(&key, on_exit)) return os_error(e);
  out->id = static_cast<std::uintptr_t>(key);
  return {};
}

std::error_code delete_thread_key(ThreadKey key) noexcept {
  if (int e = ::pthread_key_delete(static_cast<pthread_key_t>(key.id))) return os_error(e);
  return {};
}

void* thread_value(ThreadKey key) noexcept {
  return ::pthread_getspecific(static_cast<pthread_key_t>(key.id));
}

std::error_code set_thread_value(ThreadKey key, void* value) noexcept {
  if (int e = ::pthread_setspecific(static_cast<pthread_key_t>(key.id), value)) return os_error(e);
  return {};
}

// ---- errors ------------------------------------------------------------------------------------

const std::error_category& os_category() noexcept {
  return std::system_category();
}

std::string error_name(const std::error_code& ec) {
  static constexpr detail::ErrorName kNames[] = {
      RESERVOIR_ERROR_NAME(ENOMEM),  RESERVOIR_ERROR_NAME(EINVAL), RESERVOIR_ERROR_NAME(EACCES),
      RESERVOIR_ERROR_NAME(EAGAIN),  RESERVOIR_ERROR_NAME(EPERM),  RESERVOIR_ERROR_NAME(EFAULT),
      RESERVOIR_ERROR_NAME(ENOTSUP), RESERVOIR_ERROR_NAME(ENOENT), RESERVOIR_ERROR_NAME(EOVERFLOW),
      RESERVOIR_ERROR_NAME(EBADF)};
  const bool errno_value =
      ec.category() == std::system_category() || ec.category() == std::generic_category();
  return detail::error_name_in(ec.value(), kNames, errno_value ? std::size(kNames) : 0);
}

std::error_code testing::out_of_memory_error() noexcept {
  return os_error(ENOMEM);
}

std::error_code at_fork(void (*prepare)(), void (*parent)(), void (*child)()) noexcept {
  if (int e = ::pthread_atfork(prepare, parent, child)) return os_error(e);
  return {};
}

}  // namespace reservoir::pal
