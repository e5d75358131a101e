// The fault-injection seam of pal, for our own tests only: this header is not installed, and only
// test targets have its directory on their include path (pal includes it by its relative path).
// The checks it arms are inside pal's OS wrappers (the POSIX files of pal/src, pal_windows.cpp),
// so the code under test is the library as shipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

#include <reservoir/pal.hpp>

namespace reservoir::pal {

// Tests make OS calls fail on purpose. When armed for an operation, the call that would be the
// (skip+1)-th from now fails with `error` (without calling the OS) `count` times in a row. The
// check is one relaxed atomic load on calls that already cost a system call.
// `stats` covers the readings of the memory in use (current_rss, memory_limit): a failed one
// reports 0 or no limit, as when the OS will not tell.
// `barrier` covers process_barrier_supported() (an injected failure: not supported) and
// process_barrier().
// `advise` is advise_huge_pages() and unadvise_huge_pages() (hints: callers ignore their failure;
// counted all the same).
// reserve_open() counts as `reserve`, discard() as `decommit`, guard() as `guard`.
// `wait` is wait_while_equal(): an injected failure is taken as the OS's own refusal to sleep on
// the word (no futex under a seccomp filter), so the thread sleeps one short poll and returns.
// `wake` is wake_all(): counted only (arming it changes nothing: where waits sleep in the OS a
// wake cannot fail, and where they poll none is needed).
// An error injected into `prefault` is judged as the OS's own would be (POSIX: EINVAL, EPERM and
// ENOSYS become std::errc::not_supported, the caller's cue to touch the pages instead).
// `remap` is the MAP_FIXED re-map inside decommit on macOS and FreeBSD (and in the posix-generic
// build). Injected with ENOMEM (the default) it first unmaps the range, as POSIX allows a failed
// MAP_FIXED call to have done, so the test sees the worst case; with any other error the mapping
// stays as it was.
enum class Op : unsigned {
  reserve,
  commit,
  decommit,
  release,
  prefault,
  stats,
  remap,
  barrier,
  advise,
  guard,
  wait,
  wake,
  count_
};

namespace testing {
void fail(Op op, std::uint64_t skip, std::uint64_t count, std::error_code error) noexcept;
void clear() noexcept;  // disarm every operation
// The number of times `op` was called (including injected failures) since the process started.
std::uint64_t calls(Op op) noexcept;
// Runs `hook` inside every later call of `op`, on the calling thread, after the call is counted
// and before the OS is asked (nullptr: none), so that a test can hold a thread inside a call
// (a commit made under a lock, say) until another thread has reached a given point.
void on_call(Op op, void (*hook)()) noexcept;
// The error a refused call of the given kind reports on this OS (ENOMEM / ERROR_NOT_ENOUGH_MEMORY).
std::error_code out_of_memory_error() noexcept;
// Makes page_size() (and the allocation granularity, where it is the page size) report `bytes`
// instead of the OS's page size, so that the suites run as on a machine with 16 KiB (Apple
// arm64) or 64 KiB (some arm64 Linux kernels) pages. `bytes` must be a power of two and a
// multiple of the real page size; 0 restores the real one. Only before any arena exists.
// Returns false (and changes nothing) for a size it cannot take.
bool set_page_size(std::size_t bytes) noexcept;
// True if decommit re-maps the range (macOS, FreeBSD, the posix-generic build) instead of
// madvise + mprotect (Linux) or VirtualFree(MEM_DECOMMIT) (Windows).
bool decommit_remaps() noexcept;
// Makes pal::transparent_huge_pages() answer `on` (1) or `off` (0) instead of asking the OS
// (-1, the default), and pal::host_reclaims_free_pages() answer false while it is forced, so
// that both commit policies run on any machine.
void set_transparent_huge_pages(int mode) noexcept;
// Makes reserve_open() answer std::errc::not_supported (true) or ask the OS again (false, the
// default), so that the paths of systems without open reservations run here too.
void refuse_open_reservations(bool refuse) noexcept;
bool open_reservations_refused() noexcept;
// Makes guard() make its guard pages with mprotect(PROT_NONE) (true), as on Linux kernels before
// 6.13, instead of MADV_GUARD_INSTALL where the kernel takes it (false, the default); while it is
// in force pal::guard_markers() answers false.
void refuse_guard_install(bool refuse) noexcept;
bool guard_install_refused() noexcept;
// Makes pal::max_map_count() answer `count` instead of the OS (0 restores the OS's answer), so
// that the library's mapping budget (half of it) is met after a few hundred arrays, on any OS.
void set_max_map_count(std::size_t count) noexcept;
// Makes the memory-limit reading find the cgroup's mount in /proc/self/mountinfo (true) instead
// of first trying where mainstream systems mount it (false, the default), so that the path of
// systems that mount it elsewhere runs here too.
void skip_conventional_cgroup_mounts(bool skip) noexcept;
bool conventional_cgroup_mounts_skipped() noexcept;
// Makes machine_memory() describe a machine of `total` bytes of RAM, no swap, heuristic
// overcommit, whose available memory is `available` less what this process's resident set has
// grown by since the call (as if nothing else ran), so that growth past a small machine's RAM runs
// here without exhausting this one. A total of 0 restores the OS's answer.
void set_machine_memory(std::size_t total, std::size_t available) noexcept;
// Makes reserve_open() act as if the kernel refused MADV_DONTDUMP (true): it then makes no open
// reservation. Not counted as a call, so that call counts stay those of the kernel.
void refuse_dontdump(bool refuse) noexcept;
bool dontdump_refused() noexcept;
}  // namespace testing

}  // namespace reservoir::pal
