// pal for POSIX systems: Linux, macOS and FreeBSD. Their differences are the marked #if blocks.
//
// RESERVOIR_PAL_LINUX selects Linux's own paths (MAP_NORESERVE, MADV_POPULATE_WRITE, decommit by
// madvise + mprotect, VmHWM). The posix-generic build (RESERVOIR_POSIX_GENERIC) turns it off on
// Linux, so the paths macOS and FreeBSD take run and are tested here; only the calls that exist
// on one OS alone (mach, sysctl / kinfo_proc) keep Linux's /proc stand-ins.
#include <fcntl.h>
#include <pthread.h>
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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "pal_internal.hpp"

#if defined(__linux__) && !defined(RESERVOIR_POSIX_GENERIC)
#define RESERVOIR_PAL_LINUX 1
#else
#define RESERVOIR_PAL_LINUX 0
#endif

// A ThreadSanitizer build (GCC says __SANITIZE_THREAD__, clang __has_feature).
#if defined(__SANITIZE_THREAD__)
#define RESERVOIR_PAL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RESERVOIR_PAL_TSAN 1
#endif
#endif

#if RESERVOIR_PAL_LINUX
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#endif
#if defined(__linux__)
#include <sys/auxv.h>
#include <sys/vfs.h>  // statfs
#endif

#if defined(__APPLE__)
#include <mach/mach.h>
#include <mach/vm_param.h>
#elif defined(__FreeBSD__)
#include <sys/sysctl.h>
#include <sys/user.h>
#endif

namespace reservoir::pal {
namespace {

std::error_code last_error() noexcept {
  return os_error(errno);
}

// Turns thread cancellation off for its scope. open(), read() and close() are cancellation
// points, and the functions that call them here are noexcept: a cancellation acted on inside
// them would unwind through noexcept code, which ends the process (std::terminate). A
// cancellation requested meanwhile stays pending for the thread's next cancellation point.
class CancellationOff {
 public:
  CancellationOff() noexcept : ok_(::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_) == 0) {}
  ~CancellationOff() {
    if (ok_) (void)::pthread_setcancelstate(old_, &old_);  // restoring a valid state cannot fail
  }
  CancellationOff(const CancellationOff&) = delete;
  CancellationOff& operator=(const CancellationOff&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
  bool ok_;
};

#if defined(__linux__)
// Reads "Key:   123 kB" from a /proc file; returns the number times 1024, or 0.
std::size_t read_proc_kib(const char* path, const char* key) noexcept {
  const CancellationOff no_cancel;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[8192];
  std::size_t len = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
    if (len == sizeof(buf) - 1) break;
  }
  ::close(fd);
  buf[len] = '\0';
  const std::size_t key_len = std::strlen(key);
  for (const char* line = buf; line && *line;) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
      return static_cast<std::size_t>(std::strtoull(line + key_len + 1, nullptr, 10)) * 1024;
    }
    line = std::strchr(line, '\n');
    if (line) ++line;
  }
  return 0;
}
#endif

}  // namespace

// ---- sizes -------------------------------------------------------------------------------------

namespace {
// What the OS answers once is kept in constant-initialized atomics, never in function-local
// statics: a static's initialization guard stays "in progress" in a child forked while another
// thread was initializing it, and the child then waits for it forever. Two threads that ask
// first may both ask the OS; they get the same answer.

// A yes/no answer kept in `kept` (-1: not asked yet).
template <class Ask>
bool kept_answer(std::atomic<int>& kept, Ask ask) noexcept {
  int v = kept.load(std::memory_order_relaxed);
  if (v < 0) {
    v = ask() ? 1 : 0;
    kept.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

std::atomic<std::size_t> g_os_page_size{0};  // 0: not asked yet
// Linux only (the other systems' answers are constants):
[[maybe_unused]] std::atomic<int> g_barrier_registered{-1};
[[maybe_unused]] std::atomic<int> g_thp_honoured{-1};
[[maybe_unused]] std::atomic<int> g_host_reclaims{-1};

// The kernel's page size, whatever a test forces page_size() to: the unit of the page counts the
// OS reports (RSS).
std::size_t os_page_size() noexcept {
  std::size_t size = g_os_page_size.load(std::memory_order_relaxed);
  if (size == 0) {
    const long v = ::sysconf(_SC_PAGESIZE);
    size = v > 0 ? static_cast<std::size_t>(v) : static_cast<std::size_t>(::getpagesize());
    g_os_page_size.store(size, std::memory_order_relaxed);
  }
  return size;
}
}  // namespace

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

#if RESERVOIR_PAL_LINUX
namespace {
// Reads up to size-1 bytes of a small /sys file into buf, NUL-terminated; false if it cannot.
bool read_small_file(const char* path, char* buf, std::size_t size) noexcept {
  const CancellationOff no_cancel;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n;
  do {
    n = ::read(fd, buf, size - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}
}  // namespace
#endif

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

#if RESERVOIR_PAL_LINUX
namespace {
long membarrier_call(int command) noexcept {
  return ::syscall(SYS_membarrier, command, 0U, 0);
}
}  // namespace
#endif

bool process_barrier_supported() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return false;
#if RESERVOIR_PAL_LINUX
  // Registered once per process (registering again, by a second thread asking first, changes
  // nothing); a kernel without the command (before 4.14) or a sandbox that filters the call
  // answers no, and then nothing relies on it.
  return kept_answer(g_barrier_registered, [] {
    const long commands = membarrier_call(MEMBARRIER_CMD_QUERY);
    return commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  });
#else
  return false;
#endif
}

std::error_code process_barrier() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return ec;
#if RESERVOIR_PAL_LINUX
  if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) return last_error();
  return {};
#else
  return std::make_error_code(std::errc::not_supported);
#endif
}

void yield_thread() noexcept {
  (void)::sched_yield();  // cannot fail on Linux, macOS or FreeBSD
}

namespace {
// The poll of wait_while_equal where it cannot sleep on the word itself.
constexpr long kWordPollMicroseconds = 50;

void sleep_word_poll() noexcept {
  timespec interval{0, kWordPollMicroseconds * 1000};
  (void)::nanosleep(&interval, nullptr);  // EINTR only ends the sleep early: the caller re-checks
}
}  // namespace

void wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  if (std::error_code ec; injected_failure(Op::wait, &ec)) {
    sleep_word_poll();  // as when the OS refuses the wait (below)
    return;
  }
#if RESERVOIR_PAL_LINUX
  // The kernel compares the word with `expected` under its own lock before it sleeps, so a wake
  // after the change cannot be missed. EAGAIN (the word had changed) and EINTR return to the
  // caller; anything else (no futex here: ENOSYS under a seccomp filter) sleeps one poll instead,
  // so the caller's loop never spins.
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0) != 0 &&
      errno != EAGAIN && errno != EINTR) {
    sleep_word_poll();
  }
#else
  if (word.load(std::memory_order_relaxed) == expected) sleep_word_poll();
#endif
}

void wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  std::error_code ignored;
  (void)injected_failure(Op::wake, &ignored);  // counted only: the wake is made all the same
#if RESERVOIR_PAL_LINUX
  // Fails only where the wait failed too (no futex), and such waiters poll.
  (void)::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, std::numeric_limits<int>::max(), nullptr,
                  nullptr, 0);
#else
  (void)word;  // the waiters poll
#endif
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

bool transparent_huge_pages() noexcept {
  if (const int forced = detail::transparent_huge_pages_override(); forced >= 0) return forced;
#if RESERVOIR_PAL_LINUX && defined(MADV_HUGEPAGE)
  // The file reads "always [madvise] never": the bracketed word is the mode in force. `always`
  // and `madvise` both honour MADV_HUGEPAGE; `never` (or no file: no THP) ignores it.
  return kept_answer(g_thp_honoured, [] {
    char buf[128];
    if (!read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf)) {
      return false;
    }
    return std::strstr(buf, "[always]") != nullptr || std::strstr(buf, "[madvise]") != nullptr;
  });
#else
  return false;
#endif
}

bool host_reclaims_free_pages() noexcept {
  if (detail::transparent_huge_pages_override() >= 0) return false;
#if RESERVOIR_PAL_LINUX
  // A virtio balloon (virtio device id 5) that negotiated VIRTIO_BALLOON_F_REPORTING (feature
  // bit 5; the features file lists bits from 0 as '0'/'1') hands free guest pages to the host in
  // blocks of the page reporting order (2 MiB by default). Such blocks are exactly what a huge
  // page is made of, and the host must fault them in again when the guest reuses them.
  return kept_answer(g_host_reclaims, [] {
    char path[96];
    char buf[160];
    for (int i = 0; i < 64; ++i) {
      std::snprintf(path, sizeof path, "/sys/bus/virtio/devices/virtio%d/device", i);
      if (!read_small_file(path, buf, sizeof buf)) {
        if (i >= 8) break;  // numbering may have gaps after hot-unplug; stop well past them
        continue;
      }
      if (std::strtol(buf, nullptr, 0) != 5) continue;
      std::snprintf(path, sizeof path, "/sys/bus/virtio/devices/virtio%d/features", i);
      if (read_small_file(path, buf, sizeof buf) && std::strlen(buf) > 5 && buf[5] == '1') {
        return true;
      }
    }
    return false;
  });
#else
  return false;
#endif
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

// ---- resident memory ---------------------------------------------------------------------------

std::size_t current_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
#if defined(__linux__)
  return read_proc_kib("/proc/self/status", "VmRSS");
#elif defined(__APPLE__)
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info),
                &count) != KERN_SUCCESS) {
    return 0;
  }
  return static_cast<std::size_t>(info.resident_size);
#elif defined(__FreeBSD__)
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, static_cast<int>(::getpid())};
  struct kinfo_proc kp{};
  std::size_t len = sizeof(kp);
  if (::sysctl(mib, 4, &kp, &len, nullptr, 0) != 0) return 0;
  return static_cast<std::size_t>(kp.ki_rssize) * os_page_size();
#else
  return 0;
#endif
}

// ---- memory limits
// -------------------------------------------------------------------------------

#if defined(__linux__)
namespace {

// The whole of a small file (/proc, cgroupfs), or "" if it cannot be read. A file that is there
// but cannot be read now (no descriptor or memory left: EMFILE, ENFILE, ENOMEM) sets *failed; a
// file that does not exist, or may not be read, leaves it.
std::string read_small_file(const std::string& path, bool* failed) {
  const CancellationOff no_cancel;
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) *failed = true;
    return out;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) *failed = true;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// A cgroup file holding one number ("max" or a v1 value near 2^63 mean: no limit).
bool read_limit_value(const std::string& path, std::size_t* out, bool* failed) {
  const std::string text = read_small_file(path, failed);
  if (text.empty() || text.compare(0, 3, "max") == 0) return false;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (v >= (1ull << 62)) return false;
  *out = static_cast<std::size_t>(v);
  return true;
}

std::size_t stat_value(const std::string& stat, const char* key) {
  const std::string k = std::string(key) + " ";
  for (std::size_t at = 0; at < stat.size();) {
    if (stat.compare(at, k.size(), k) == 0) {
      return static_cast<std::size_t>(std::strtoull(stat.c_str() + at + k.size(), nullptr, 10));
    }
    at = stat.find('\n', at);
    if (at == std::string::npos) break;
    ++at;
  }
  return 0;
}

// Where the memory controller is mounted and this process's cgroup under it.
struct CgroupDir {
  std::string mount;  // e.g. /sys/fs/cgroup or /sys/fs/cgroup/memory
  std::string path;   // the cgroup, relative to the mount ("/" or "/a/b")
  bool v2 = false;
};

// Calls f(line) for each line of text.
template <class F>
void for_each_line(const std::string& text, F f) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    f(text.substr(at, end - at));
    at = end + 1;
  }
}

// The file system type of `path` as statfs says (0 where it cannot say).
unsigned long fs_type(const char* path) noexcept {
  struct statfs fs{};
  return ::statfs(path, &fs) == 0 ? static_cast<unsigned long>(fs.f_type) : 0;
}

// The memory controller where systemd, Docker and every mainstream distribution mount it: v1's at
// /sys/fs/cgroup/memory (a cgroup file system holding memory.limit_in_bytes), else v2's at
// /sys/fs/cgroup (a cgroup2 file system whose cgroup.controllers lists memory). A statfs or two
// instead of parsing /proc/self/mountinfo, whose generation costs more than every other file the
// limit check reads together; false: look there. Throws what std::string throws.
bool conventional_memory_mounts(std::string* v1_mount, std::string* v2_mount) {
  constexpr unsigned long kCgroupMagic = 0x27e0eb, kCgroup2Magic = 0x63677270;
  if (fs_type("/sys/fs/cgroup/memory") == kCgroupMagic &&
      ::access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0) {
    *v1_mount = "/sys/fs/cgroup/memory";
    return true;
  }
  if (fs_type("/sys/fs/cgroup") == kCgroup2Magic) {
    bool failed = false;  // unread: mountinfo decides
    const std::string controllers = read_small_file("/sys/fs/cgroup/cgroup.controllers", &failed);
    if (controllers.find("memory") == std::string::npos) return false;
    *v2_mount = "/sys/fs/cgroup";
    return true;
  }
  return false;
}

bool find_memory_cgroup(CgroupDir* out, bool* failed) {
  // 1. Mount points: a cgroup2 mount, or a v1 cgroup mount whose options name "memory".
  std::string v1_mount, v2_mount;
  if (testing::conventional_cgroup_mounts_skipped() ||
      !conventional_memory_mounts(&v1_mount, &v2_mount))
    for_each_line(read_small_file("/proc/self/mountinfo", failed), [&](const std::string& line) {
      // "id parent major:minor root mountpoint options ... - fstype source superoptions"
      const std::size_t dash = line.find(" - ");
      if (dash == std::string::npos) return;
      std::size_t f = 0;
      std::string fields[5];
      for (int i = 0; i < 5 && f < dash; ++i) {
        const std::size_t sp = line.find(' ', f);
        fields[i] = line.substr(f, (sp == std::string::npos ? dash : sp) - f);
        f = sp == std::string::npos ? dash : sp + 1;
      }
      const std::string tail = line.substr(dash + 3);
      if (tail.compare(0, 8, "cgroup2 ") == 0) {
        if (v2_mount.empty()) v2_mount = fields[4];
      } else if (tail.compare(0, 7, "cgroup ") == 0) {
        const std::string super = tail.substr(tail.rfind(' ') + 1);
        if (("," + super + ",").find(",memory,") != std::string::npos) v1_mount = fields[4];
      }
    });
  // 2. This process's cgroup: "N:memory:/path" (v1) or "0::/path" (v2).
  std::string v1_path, v2_path;
  for_each_line(read_small_file("/proc/self/cgroup", failed), [&](const std::string& line) {
    const std::size_t c1 = line.find(':');
    const std::size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) return;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    if (controllers.empty()) {
      v2_path = line.substr(c2 + 1);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      v1_path = line.substr(c2 + 1);
    }
  });
  // 3. v1's memory controller wins where it is mounted (hybrid systems mount an empty v2 too).
  if (!v1_mount.empty() && !v1_path.empty()) {
    *out = {v1_mount, v1_path, false};
    return true;
  }
  if (!v2_mount.empty() && !v2_path.empty()) {
    *out = {v2_mount, v2_path, true};
    return true;
  }
  return false;
}

}  // namespace
#endif

bool memory_limit([[maybe_unused]] MemoryLimit* out) noexcept {
  out->unreadable = false;
  if (std::error_code ec; injected_failure(Op::stats, &ec)) {
    out->unreadable = true;
    return false;
  }
#if defined(__linux__)
  // A file that could not be read (descriptors or memory ran out) may have held the tightest
  // limit: then nothing found is reported as found, and the caller knows it did not learn.
  bool failed = false;
  try {
    CgroupDir dir;
    if (!find_memory_cgroup(&dir, &failed)) {
      out->unreadable = failed;
      return false;
    }
    // The cgroup and each ancestor up to the mount: the level with the least headroom decides.
    bool found = false;
    std::size_t best_headroom = 0;
    std::string path = dir.path;
    for (;;) {
      const std::string base = dir.mount + (path == "/" ? "" : path) + "/";
      std::size_t limit = 0;
      if (read_limit_value(base + (dir.v2 ? "memory.max" : "memory.limit_in_bytes"), &limit,
                           &failed)) {
        std::size_t usage = 0;
        const std::string usage_file = base + (dir.v2 ? "memory.current" : "memory.usage_in_bytes");
        const std::string usage_text = read_small_file(usage_file, &failed);
        if (!usage_text.empty()) {
          usage = static_cast<std::size_t>(std::strtoull(usage_text.c_str(), nullptr, 10));
          const std::string stat = read_small_file(base + "memory.stat", &failed);
          const std::size_t inactive =
              stat_value(stat, dir.v2 ? "inactive_file" : "total_inactive_file");
          usage = inactive < usage ? usage - inactive : 0;
          const std::size_t headroom = usage < limit ? limit - usage : 0;
          if (!found || headroom < best_headroom) {
            found = true;
            best_headroom = headroom;
            out->limit = limit;
            out->usage = usage;
            out->source = base + (dir.v2 ? "memory.max" : "memory.limit_in_bytes");
          }
        }
      }
      if (path.empty() || path == "/") break;
      const std::size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
    if (failed) {
      out->unreadable = true;
      return false;
    }
    return found;
  } catch (...) {
    out->unreadable = true;  // no memory to read the files
    return false;
  }
#else
  return false;  // no cgroups
#endif
}

// ---- limits of the machine and the process, and fork ------------------------------------------

bool machine_memory([[maybe_unused]] MachineMemory* out) noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return false;
  if (detail::machine_memory_override(out)) return true;
#if defined(__linux__)
  const CancellationOff no_cancel;
  int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  std::size_t len = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
    if (len == sizeof(buf) - 1) break;
  }
  (void)::close(fd);  // a read-only file: nothing is lost if close reports an error
  buf[len] = '\0';
  MachineMemory m;
  const struct {
    const char* key;
    std::size_t* value;
  } fields[] = {{"MemTotal:", &m.total},
                {"MemAvailable:", &m.available},
                {"SwapTotal:", &m.swap_total},
                {"SwapFree:", &m.swap_free}};
  for (const auto& f : fields) {
    const char* at = std::strstr(buf, f.key);
    if (at) {
      *f.value =
          static_cast<std::size_t>(std::strtoull(at + std::strlen(f.key), nullptr, 10)) * 1024;
    }
  }
  if (m.total == 0) return false;
  fd = ::open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char mode[8] = {};
    if (::read(fd, mode, sizeof(mode) - 1) > 0 && mode[0] >= '0' && mode[0] <= '2') {
      m.overcommit = mode[0] - '0';
    }
    (void)::close(fd);
  }
  *out = m;
  return true;
#else
  return false;  // the machine's memory is not read here: no step is refused for it
#endif
}

bool address_space_limit(AddressSpaceLimit* out) noexcept {
  struct rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return false;
  out->limit = static_cast<std::size_t>(lim.rlim_cur);
#if defined(__linux__)
  out->in_use = read_proc_kib("/proc/self/status", "VmSize");
#else
  out->in_use = 0;
#endif
  return true;
}

std::error_code at_fork(void (*prepare)(), void (*parent)(), void (*child)()) noexcept {
  if (int e = ::pthread_atfork(prepare, parent, child)) return os_error(e);
  return {};
}

}  // namespace reservoir::pal
