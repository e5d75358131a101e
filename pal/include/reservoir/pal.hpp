// reservoir/pal.hpp - the platform abstraction layer: the only code that calls the OS.
//
// Internal to reservoir: this header is not installed, and no public header includes it. The
// library's sources, its tests and its bench use it; programs that use reservoir do not.
//
// One contract, two implementations: the POSIX files of pal/src (Linux, macOS, FreeBSD: one file
// per OS and per concern, pal_posix_internal.hpp lists them) and pal/src/pal_windows.cpp, chosen
// once in CMakeLists.txt. Every function is noexcept, never prints,
// never aborts, and reports OS failures as a std::error_code carrying errno / GetLastError().
// Our tests can make the OS calls fail on purpose through a seam whose header is not installed
// (pal/testing/pal_testing.hpp).
//
// Vocabulary (one word, one meaning):
//   reserve   - take address space only; touching it faults; costs no RAM and no commit charge.
//   commit    - make a reserved range readable and writable (RAM is supplied on first touch or,
//               on Windows, charged against the commit limit at once).
//   decommit  - give the RAM of a committed range back; it faults again, and reads as zeros once
//               committed anew.
//   release   - give the whole reservation back.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

namespace reservoir::pal {

// ---- sizes -------------------------------------------------------------------------------------

// The virtual-memory page size, queried once from the OS (4 KiB on x86-64, 16 KiB on Apple
// Silicon, 4/16/64 KiB on arm64 Linux). Commit and decommit work in whole pages.
std::size_t page_size() noexcept;

// The alignment and size unit of a reservation: 64 KiB on Windows, the page size elsewhere.
std::size_t allocation_granularity() noexcept;

// ---- what the library learns of the machine ----------------------------------------------------

// Every fact about the machine and the OS that reservoir's policies depend on, in one struct. Each
// is read from the OS once, on first use, and kept; the pal::testing seam may force the page size
// and the huge-page answers, and the struct reports what is forced.
struct Capabilities {
  std::size_t page_size = 0;               // page_size()
  std::size_t allocation_granularity = 0;  // allocation_granularity()
  bool transparent_huge_pages = false;     // transparent_huge_pages()
  bool host_reclaims_free_pages = false;   // host_reclaims_free_pages(), asked only with THP
  // A reservation costs the OS the same whatever its size, so a pool may reserve chunks of
  // terabytes: Linux (an anonymous MAP_NORESERVE mapping is one mapping, charged nothing until
  // touched). Elsewhere a reservation's cost grows with its size: XNU splits an anonymous mapping
  // into 128 MiB map entries, FreeBSD charges swap for the whole object at the first mprotect of a
  // clipped entry, Wine keeps a byte per reserved page.
  bool size_free_reservations = false;
};
Capabilities capabilities() noexcept;

// ---- address space -----------------------------------------------------------------------------

// Reserves `size` bytes of address space (a multiple of allocation_granularity(), > 0) with no
// access and no RAM. On success stores the base (aligned to allocation_granularity()) in *out.
// On failure *out is untouched.
std::error_code reserve(std::size_t size, void** out) noexcept;
// As reserve(), and no transparent huge pages inside it unless advise_huge_pages() asks for them
// (Linux: MADV_NOHUGEPAGE over the whole range, a hint whose refusal changes nothing), so that
// unadvise_huge_pages() undoes that advice exactly, restoring the flags the range was made with.
std::error_code reserve_without_huge_pages(std::size_t size, void** out) noexcept;

// The size of the user address space this process can reserve from: the span below the highest
// user address (Linux, FreeBSD: the next power of two above the process's initial stack, which
// the kernel places at the top, whatever stack the calling thread runs on, so 128 TiB on 47-bit
// x86-64 and arm64, 512 GiB on 39-bit arm64 kernels; macOS:
// MACH_VM_MAX_ADDRESS, 128 TiB; Windows: lpMaximumApplicationAddress), lowered to RLIMIT_AS
// where that is set. Never 0.
std::size_t address_space_size() noexcept;

// Makes [addr, addr+size) readable and writable. addr and size are page-aligned and lie inside one
// reservation. Committing an already committed page is harmless and keeps its contents.
std::error_code commit(void* addr, std::size_t size) noexcept;

// Returns the RAM behind [addr, addr+size) (page-aligned, committed) to the OS and makes the range
// inaccessible again. When it is committed anew it reads as zeros. On failure the range may still
// be accessible; its contents are then unspecified but the mapping stays valid.
std::error_code decommit(void* addr, std::size_t size) noexcept;

// Returns a whole reservation made by reserve() or reserve_open(); `size` is the size passed to it.
std::error_code release(void* addr, std::size_t size) noexcept;

// ---- open reservations: read-write from the start
// ------------------------------------------------
//
// Committing a range inside a reservation changes its protection, and on Linux each committed
// range amid inaccessible ones is a kernel mapping of its own: the call splits the reservation's
// mapping (a system call, and one more entry of vm.max_map_count). An open reservation is
// readable and writable from the start, so ranges inside it need no commit; guard() makes the
// pages between them fault, and discard() gives pages back without changing access.

// Reserves `size` bytes (as reserve(): a multiple of allocation_granularity(), no RAM) readable
// and writable at once: RAM is supplied on first touch, and none of it is charged against a
// commit limit until touched. No transparent huge pages inside it unless advise_huge_pages() asks
// for them. Not in core dumps (MADV_DONTDUMP), since the kernel would dump the whole range once
// written. Linux only, and not where the whole range would count at once: strict overcommit
// (vm.overcommit_memory = 2), a finite data limit (RLIMIT_DATA), locked memory (mlockall: any
// VmLck); nor where the kernel refuses the advice. std::errc::not_supported there and elsewhere,
// and then reserve() is the way.
std::error_code reserve_open(std::size_t size, void** out) noexcept;

// Makes [addr, addr+size) (page-aligned, inside an open reservation) fault on every access, for
// good: Linux 6.13+ marks the pages in the page table (MADV_GUARD_INSTALL), which leaves the
// mapping whole; older kernels make the range inaccessible (mprotect), which splits it.
std::error_code guard(void* addr, std::size_t size) noexcept;

// Returns the RAM behind [addr, addr+size) (page-aligned, inside an open reservation) to the OS;
// the range stays readable and writable and reads as zeros afterwards (Linux MADV_DONTNEED).
std::error_code discard(void* addr, std::size_t size) noexcept;

// ---- kernel mappings (pal_maps.cpp)
// --------------------------------------------------------------

// How many mappings the kernel lets this process hold (Linux: /proc/sys/vm/max_map_count, read on
// the first call and kept, read again with `reread`, since it can be raised while the process
// runs), or 0 where there is no such count (macOS, FreeBSD, Windows, the posix-generic build:
// address space and memory bound them) or it cannot be read. testing::set_max_map_count()
// replaces the answer on every platform.
std::size_t max_map_count(bool reread = false) noexcept;
// What max_map_count() would answer without asking the OS: the forced count, or the last reading,
// or 0 if there is none yet.
std::size_t max_map_count_known() noexcept;

// True if guard() installs guard markers (Linux 6.13+, MADV_GUARD_INSTALL): guards that leave the
// mapping whole and that unguard() can lift. Asked of the kernel once, on a page of its own;
// false elsewhere, and while testing::refuse_guard_install(true) is in force.
bool guard_markers() noexcept;

// Lifts the guard markers of [addr, addr+size) (page-aligned, inside an open reservation): the
// pages read and write again, as never touched (MADV_GUARD_REMOVE). Only where guard_markers();
// std::errc::not_supported elsewhere. Counted and injected as Op::guard.
std::error_code unguard(void* addr, std::size_t size) noexcept;

// Asks the OS to back a committed range with RAM now instead of on first touch (Linux 5.14+:
// MADV_POPULATE_WRITE). Returns std::errc::not_supported where the OS cannot or will not (no such
// call, a kernel without the advice, a sandbox refusing it with EPERM or ENOSYS); callers may fall
// back to touching the pages. Other errors (ENOMEM) mean the memory cannot be had. Contents are
// unchanged.
std::error_code prefault(void* addr, std::size_t size) noexcept;

// Asks for transparent huge pages on [addr, addr+size) (Linux MADV_HUGEPAGE). A hint; returns
// std::errc::not_supported elsewhere.
std::error_code advise_huge_pages(void* addr, std::size_t size) noexcept;

// Asks for no transparent huge pages on [addr, addr+size) (Linux MADV_NOHUGEPAGE): undoes
// advise_huge_pages() for whoever uses the range next. std::errc::not_supported elsewhere.
std::error_code unadvise_huge_pages(void* addr, std::size_t size) noexcept;

// True if advise_huge_pages() gets 2 MiB pages here: Linux with transparent huge pages in
// `always` or `madvise` mode (/sys/kernel/mm/transparent_hugepage/enabled, read once). False
// when THP is `never` or absent, and on every other OS (Windows large pages need
// SeLockMemoryPrivilege and MEM_LARGE_PAGES at reservation time, and cannot be decommitted).
// A first touch of an advised, committed, aligned 2 MiB range then maps a whole huge page.
bool transparent_huge_pages() noexcept;

// True if this is a virtual machine whose hypervisor takes back the guest's free memory in 2 MiB
// blocks (Linux: a virtio balloon with free page reporting). There a huge page is mostly a block
// the host must fault in again, and first touches of 2 MiB pages cost more than the same memory
// in 4 KiB pages (figures: docs/big-arrays.md). Read once. False on other OSes.
bool host_reclaims_free_pages() noexcept;

// ---- process-wide memory barrier ---------------------------------------------------------------
//
// An asymmetric fence: a thread whose side of a protocol must be cheap orders its accesses with a
// compiler barrier alone, and the rare other side calls process_barrier(), which makes every
// thread of the process that is running pass a full memory barrier before it returns (Linux:
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), a system call that waits for every CPU). Together
// the two order like a full fence on both sides.

// True if process_barrier() works here; the first call registers the process for it (Linux 4.14+).
// False on other systems: Windows' FlushProcessWriteBuffers is not used, since Wine 8, where the
// Windows build is tested, implements it as a stub that does nothing; macOS has no such call, and
// FreeBSD's membarrier (14.1+) is not used yet.
bool process_barrier_supported() noexcept;

// Issues the barrier. Only valid after process_barrier_supported() returned true.
std::error_code process_barrier() noexcept;

// Lets another thread run (sched_yield, SwitchToThread): for a thread waiting on another one.
void yield_thread() noexcept;

// Sleeps while `word` holds `expected`, in the OS, until wake_all(word) or a change of the word;
// may also return spuriously, so the caller re-checks. Linux: futex; Windows: WaitOnAddress;
// other systems: short sleeps that re-check (pal_posix_generic.cpp), so a wake is seen late, never
// missed.
// Not std::atomic::wait: libstdc++ where it has no futex (MinGW-w64, macOS, FreeBSD) checks the
// value outside the lock its notify takes, so a notify can be lost and a waiter sleep for ever.
void wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept;

// Wakes every thread in wait_while_equal on `word`. Call it after changing the word.
void wake_all(const std::atomic<std::uint32_t>& word) noexcept;

// ---- memory limits
// -------------------------------------------------------------------------------

// The tightest memory limit the process is under: a Linux memory cgroup (v2 memory.max with
// memory.current; v1 memory.limit_in_bytes with memory.usage_in_bytes), its own or an
// ancestor's, found through /proc/self/cgroup and /proc/self/mountinfo. `usage` excludes the
// cgroup's inactive file cache, which the kernel reclaims before it kills anything.
struct MemoryLimit {
  std::size_t limit = 0;    // bytes the cgroup may use
  std::size_t usage = 0;    // bytes it uses now (its working set)
  std::string source;       // the file the limit came from, for messages
  bool unreadable = false;  // with false returned: the files could not be read (no descriptor or
                            // memory left), so whether a limit is set is not known
};
// True and *out filled if a limit is set; false if none is (or none can be read, and then
// out->unreadable is set; or on an OS without cgroups; Windows job-object limits already make
// VirtualAlloc's commit fail).
bool memory_limit(MemoryLimit* out) noexcept;

// ---- per-thread values --------------------------------------------------------------------------
//
// A pointer per thread that the OS keeps (POSIX: a pthread key; Windows: fiber-local storage),
// with a function the OS runs when a thread that set it ends. Unlike a C++ thread_local object
// with a destructor, it does not depend on the compiler's thread_local storage: MinGW-w64 GCC keeps
// thread_local objects in emutls blocks that winpthreads may free before it runs the destructors
// of the objects in them (GCC bug 80816), so there such a destructor works on freed memory.

struct ThreadKey {
  std::uintptr_t id = 0;
};
using ThreadExitFn = void (*)(void* value);

// Creates a key whose value is nullptr on every thread until that thread sets it. When a thread
// (on Windows: a fiber) whose value is not nullptr ends, `on_exit` runs once with that value,
// which then reads nullptr. It may run before or after the thread's C++ thread_local destructors
// (after them on glibc and on MinGW-w64 threads started by winpthreads, such as std::thread's),
// so code that runs during thread exit must expect nullptr. On Windows it may also run when the
// process exits. It must not wait for anything another thread may hold at that moment. `on_exit`
// must stay loaded while any thread that set a value may end: code that is unloaded deletes its
// keys first (delete_thread_key). Windows allows at most 8 keys per process, deleted ones
// included (ERROR_NO_SYSTEM_RESOURCES beyond).
std::error_code create_thread_key(ThreadExitFn on_exit, ThreadKey* out) noexcept;

// Deletes a key: from then on no thread's end runs its `on_exit`, whatever value the thread had
// set (POSIX: pthread_key_delete; Windows: FlsFree, which may run `on_exit` at once, in the
// calling thread, for each value still set: `on_exit` must then expect a value of another
// thread). The key must not be used afterwards.
std::error_code delete_thread_key(ThreadKey key) noexcept;

// The calling thread's value of `key`, or nullptr.
void* thread_value(ThreadKey key) noexcept;

// Sets the calling thread's value of `key`. A value set while the thread is already ending may
// never reach `on_exit`.
std::error_code set_thread_value(ThreadKey key, void* value) noexcept;

// ---- errors ------------------------------------------------------------------------------------

// The category of the error codes above: errno on POSIX, GetLastError() on Windows (whose
// message() uses FormatMessage, so the text is the OS's own words).
const std::error_category& os_category() noexcept;

// "ENOMEM" / "ERROR_NOT_ENOUGH_MEMORY" style symbolic name of an OS error, or the number.
std::string error_name(const std::error_code& ec);

// "Cannot allocate memory (ENOMEM)": the OS's words plus the symbolic name.
std::string describe(const std::error_code& ec);

// ---- resident memory ---------------------------------------------------------------------------

// Current resident set size of this process in bytes (Linux VmRSS, macOS task_info, FreeBSD
// kinfo_proc, Windows WorkingSetSize): the usage a memory limit set by hand
// (reservoir::set_memory_limit) is checked against. 0 if the OS will not tell.
std::size_t current_rss() noexcept;

// ---- limits of the machine and the process, and fork ------------------------------------------
//
// What the arena checks a large commit against, what sizes the default reservation under an
// address-space limit, and the hook that keeps the library's locks usable in a forked child.

// The machine's memory as the OS reports it now (Linux: one read of /proc/meminfo and of
// /proc/sys/vm/overcommit_memory). False where the OS commits on reservation anyway (Windows:
// VirtualAlloc(MEM_COMMIT) itself fails beyond the commit limit) or will not tell.
struct MachineMemory {
  std::size_t total = 0;       // RAM (MemTotal)
  std::size_t available = 0;   // RAM it could give without swapping (MemAvailable)
  std::size_t swap_total = 0;  // SwapTotal
  std::size_t swap_free = 0;   // SwapFree
  int overcommit = -1;         // Linux vm.overcommit_memory (0, 1, 2); -1 where unknown
};
bool machine_memory(MachineMemory* out) noexcept;

// The process's address-space limit (POSIX RLIMIT_AS, `ulimit -v`) and how much of it is
// mapped now (Linux VmSize; elsewhere 0, unknown). False if no such limit is set (and on
// Windows, which has none).
struct AddressSpaceLimit {
  std::size_t limit = 0;
  std::size_t in_use = 0;
};
bool address_space_limit(AddressSpaceLimit* out) noexcept;

// Registers functions fork() runs in the forking thread: `prepare` before the fork, `parent`
// and `child` after it in each process (POSIX pthread_atfork). std::errc::not_supported on
// Windows, which has no fork.
std::error_code at_fork(void (*prepare)(), void (*parent)(), void (*child)()) noexcept;

}  // namespace reservoir::pal
