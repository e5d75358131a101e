// pal for Windows: VirtualAlloc reserve/commit, VirtualFree decommit/release.
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
// windows.h first: psapi.h needs its types.
#include <psapi.h>
#include <synchapi.h>  // WaitOnAddress: link synchronization

#include <array>
#include <atomic>
#include <cstdio>
#include <utility>

#include "pal_internal.hpp"

namespace reservoir::pal {
namespace {

std::error_code last_error() noexcept {
  return os_error(static_cast<int>(::GetLastError()));
}

const SYSTEM_INFO& system_info() noexcept {
  static const SYSTEM_INFO info = [] {
    SYSTEM_INFO si{};
    ::GetSystemInfo(&si);
    return si;
  }();
  return info;
}

// GetLastError() values, with FormatMessage for the OS's own words. libstdc++'s system_category
// on MinGW treats values as errno, so Windows codes need a category of their own.
class WindowsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "windows"; }
  std::string message(int code) const override {
    char* text = nullptr;
    DWORD n = ::FormatMessageA(
        FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
        nullptr, static_cast<DWORD>(code), MAKELANGID(LANG_NEUTRAL, SUBLANG_DEFAULT),
        reinterpret_cast<LPSTR>(&text), 0, nullptr);
    if (n == 0 || text == nullptr) return "Windows error " + std::to_string(code);
    std::string result(text, n);
    ::LocalFree(text);
    return result;
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    switch (code) {
      case ERROR_NOT_ENOUGH_MEMORY:
      case ERROR_OUTOFMEMORY:
      case ERROR_COMMITMENT_LIMIT:
        return std::errc::not_enough_memory;
      case ERROR_INVALID_PARAMETER:
      case ERROR_INVALID_ADDRESS:
        return std::errc::invalid_argument;
      case ERROR_ACCESS_DENIED:
        return std::errc::permission_denied;
      case ERROR_NOT_SUPPORTED:
        return std::errc::not_supported;
      default:
        return {code, *this};
    }
  }
};

}  // namespace

// ---- sizes -------------------------------------------------------------------------------------

std::size_t page_size() noexcept {
  if (std::size_t forced = detail::page_size_override()) return forced;
  return system_info().dwPageSize;
}

std::size_t allocation_granularity() noexcept {
  const std::size_t g = system_info().dwAllocationGranularity;
  const std::size_t forced = detail::page_size_override();
  return forced > g ? forced : g;
}

bool testing::decommit_remaps() noexcept {
  return false;
}

// ---- address space -----------------------------------------------------------------------------

std::size_t address_space_size() noexcept {
  // 128 TiB on Windows 8.1 and later (x64), 8 TiB before; 2-4 GiB for 32-bit processes.
  const SYSTEM_INFO& si = system_info();
  const auto top = reinterpret_cast<std::uintptr_t>(si.lpMaximumApplicationAddress);
  const auto bottom = reinterpret_cast<std::uintptr_t>(si.lpMinimumApplicationAddress);
  return top > bottom ? static_cast<std::size_t>(top - bottom) + 1 : 1;
}

std::error_code reserve(std::size_t size, void** out) noexcept {
  std::error_code ec;
  if (injected_failure(Op::reserve, &ec)) return ec;
  void* p = ::VirtualAlloc(nullptr, size, MEM_RESERVE, PAGE_NOACCESS);
  if (p == nullptr) return last_error();
  *out = p;
  return {};
}

std::error_code reserve_without_huge_pages(std::size_t size, void** out) noexcept {
  return reserve(size, out);  // no transparent huge pages here
}

std::error_code commit(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::commit, &ec)) return ec;
  // Charged against the commit limit (RAM + pagefile) here, so OOM shows now, not at first touch.
  if (::VirtualAlloc(addr, size, MEM_COMMIT, PAGE_READWRITE) == nullptr) return last_error();
  return {};
}

std::error_code decommit(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::decommit, &ec)) return ec;
  if (!::VirtualFree(addr, size, MEM_DECOMMIT)) return last_error();
  return {};
}

std::error_code release(void* addr, std::size_t /*size*/) noexcept {
  std::error_code ec;
  if (injected_failure(Op::release, &ec)) return ec;
  // MEM_RELEASE requires size 0: the whole reservation goes.
  if (!::VirtualFree(addr, 0, MEM_RELEASE)) return last_error();
  return {};
}

namespace {
// An operation Windows does not have: counted (and refused if a test armed it), then
// std::errc::not_supported.
std::error_code not_supported(Op op) noexcept {
  std::error_code ec;
  if (injected_failure(op, &ec)) return ec;
  return std::make_error_code(std::errc::not_supported);
}
}  // namespace

// Windows commits inside a reservation without splitting anything and charges every committed
// page against the commit limit at once: an open reservation would charge all of it.
std::error_code reserve_open(std::size_t, void**) noexcept {
  return std::make_error_code(std::errc::not_supported);
}

std::error_code guard(void*, std::size_t) noexcept {
  return not_supported(Op::guard);
}

std::error_code discard(void*, std::size_t) noexcept {
  return not_supported(Op::decommit);
}

std::error_code prefault(void*, std::size_t) noexcept {
  return not_supported(Op::prefault);  // callers touch the pages instead
}

std::error_code advise_huge_pages(void*, std::size_t) noexcept {
  // Large pages on Windows need SeLockMemoryPrivilege and MEM_LARGE_PAGES at reservation time,
  // are committed whole when reserved and cannot be decommitted: not a growable reservation.
  return not_supported(Op::advise);
}

std::error_code unadvise_huge_pages(void*, std::size_t) noexcept {
  return not_supported(Op::advise);
}

bool transparent_huge_pages() noexcept {
  const int forced = detail::transparent_huge_pages_override();
  return forced > 0;
}

bool host_reclaims_free_pages() noexcept {
  return false;
}

bool process_barrier_supported() noexcept {
  std::error_code ec;
  (void)injected_failure(Op::barrier, &ec);  // counted; the answer is no either way
  return false;
}

std::error_code process_barrier() noexcept {
  std::error_code ec;
  if (injected_failure(Op::barrier, &ec)) return ec;
  return std::make_error_code(std::errc::not_supported);
}

void yield_thread() noexcept {
  (void)::SwitchToThread();  // FALSE only means no other thread was ready
}

void wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  // WaitOnAddress compares under the lock its wake takes, so a wake after the change cannot be
  // missed; it returns FALSE only on a timeout, which INFINITE never reaches. Were it to fail
  // anyway, a millisecond's sleep keeps the caller's loop from spinning.
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (std::error_code ec; injected_failure(Op::wait, &ec)) {
    ::Sleep(1);  // as when the wait fails (below)
    return;
  }
  std::uint32_t compare = expected;
  auto* address = const_cast<std::atomic<std::uint32_t>*>(&word);
  if (!::WaitOnAddress(address, &compare, sizeof(compare), INFINITE)) ::Sleep(1);
}

void wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  std::error_code ignored;
  (void)injected_failure(Op::wake, &ignored);  // counted only: the wake is made all the same
  ::WakeByAddressAll(const_cast<std::atomic<std::uint32_t>*>(&word));
}

// ---- per-thread values --------------------------------------------------------------------------

namespace {

// FlsAlloc passes its callback only the value, and wants a WINAPI function (another calling
// convention on 32-bit x86): one trampoline per key, each knowing its key's index and function.
constexpr std::size_t kMaxThreadKeys = 8;
std::atomic<std::size_t> g_thread_keys{0};
std::array<std::atomic<ThreadExitFn>, kMaxThreadKeys> g_thread_exit_fns{};
std::array<std::atomic<DWORD>, kMaxThreadKeys> g_fls_indexes{};

template <std::size_t I>
VOID WINAPI thread_exit_trampoline(PVOID value) {
  if (value == nullptr) return;
  const ThreadExitFn on_exit = g_thread_exit_fns[I].load(std::memory_order_acquire);
  if (on_exit == nullptr) return;
  on_exit(value);
  // The contract says the value then reads nullptr, so that code running later in this thread's
  // exit does not find it. Wine clears it after the callback; Microsoft's documentation does not
  // say, so clear it here too. When a fiber other than the current one is deleted, the current
  // fiber's value differs and stays.
  const DWORD index = g_fls_indexes[I].load(std::memory_order_acquire);
  if (::FlsGetValue(index) == value) ::FlsSetValue(index, nullptr);
}

template <std::size_t... I>
constexpr std::array<PFLS_CALLBACK_FUNCTION, kMaxThreadKeys> make_trampolines(
    std::index_sequence<I...>) {
  return {&thread_exit_trampoline<I>...};
}
constexpr std::array<PFLS_CALLBACK_FUNCTION, kMaxThreadKeys> kTrampolines =
    make_trampolines(std::make_index_sequence<kMaxThreadKeys>());

}  // namespace

std::error_code create_thread_key(ThreadExitFn on_exit, ThreadKey* out) noexcept {
  const std::size_t i = g_thread_keys.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxThreadKeys) return os_error(ERROR_NO_SYSTEM_RESOURCES);
  // The function is in place before the index exists: no thread can set a value, so none can
  // exit with one, before both are.
  g_thread_exit_fns[i].store(on_exit, std::memory_order_release);
  const DWORD index = ::FlsAlloc(kTrampolines[i]);
  if (index == FLS_OUT_OF_INDEXES) return last_error();  // trampoline i stays unused
  g_fls_indexes[i].store(index, std::memory_order_release);
  out->id = index;
  return {};
}

std::error_code delete_thread_key(ThreadKey key) noexcept {
  if (!::FlsFree(static_cast<DWORD>(key.id))) return last_error();
  return {};
}

void* thread_value(ThreadKey key) noexcept {
  return ::FlsGetValue(static_cast<DWORD>(key.id));
}

std::error_code set_thread_value(ThreadKey key, void* value) noexcept {
  if (!::FlsSetValue(static_cast<DWORD>(key.id), value)) return last_error();
  return {};
}

// ---- errors ------------------------------------------------------------------------------------

const std::error_category& os_category() noexcept {
  static const WindowsCategory category;
  return category;
}

std::string error_name(const std::error_code& ec) {
  static constexpr detail::ErrorName kNames[] = {
      RESERVOIR_ERROR_NAME(ERROR_NOT_ENOUGH_MEMORY), RESERVOIR_ERROR_NAME(ERROR_OUTOFMEMORY),
      RESERVOIR_ERROR_NAME(ERROR_COMMITMENT_LIMIT),  RESERVOIR_ERROR_NAME(ERROR_INVALID_PARAMETER),
      RESERVOIR_ERROR_NAME(ERROR_INVALID_ADDRESS),   RESERVOIR_ERROR_NAME(ERROR_ACCESS_DENIED),
      RESERVOIR_ERROR_NAME(ERROR_NOT_SUPPORTED)};
  const bool ours = ec.category() == os_category();
  return detail::error_name_in(ec.value(), kNames, ours ? std::size(kNames) : 0);
}

std::error_code testing::out_of_memory_error() noexcept {
  return os_error(ERROR_NOT_ENOUGH_MEMORY);
}

// ---- resident memory ---------------------------------------------------------------------------

namespace {
bool memory_counters(PROCESS_MEMORY_COUNTERS* pmc) noexcept {
  return ::GetProcessMemoryInfo(::GetCurrentProcess(), pmc, sizeof(*pmc)) != 0;
}
}  // namespace

std::size_t current_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  PROCESS_MEMORY_COUNTERS pmc{};
  return memory_counters(&pmc) ? pmc.WorkingSetSize : 0;
}

bool memory_limit(MemoryLimit*) noexcept {
  // A job object's memory limit makes VirtualAlloc(MEM_COMMIT) itself fail: nothing to read.
  return false;
}

// ---- limits of the machine and the process, and fork ------------------------------------------

bool machine_memory(MachineMemory* out) noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return false;
  if (detail::machine_memory_override(out)) return true;
  // VirtualAlloc(MEM_COMMIT) is charged against the commit limit and fails cleanly beyond it.
  return false;
}

bool address_space_limit(AddressSpaceLimit*) noexcept {
  return false;  // Windows has no per-process address-space limit like RLIMIT_AS
}

std::error_code at_fork(void (*)(), void (*)(), void (*)()) noexcept {
  return std::make_error_code(std::errc::not_supported);
}

}  // namespace reservoir::pal
