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

#include <array>
#include <atomic>
#include <cstdio>
#include <utility>

#include "pal_internal.hpp"

namespace reservoir::pal {
namespace {

using detail::injected_failure;
using detail::os_error;

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

std::error_code prefault(void* addr, std::size_t size) noexcept {
  std::error_code ec;
  if (injected_failure(Op::prefault, &ec)) return ec;
  (void)addr;
  (void)size;
  return std::make_error_code(std::errc::not_supported);  // callers touch the pages instead
}

std::error_code advise_huge_pages(void*, std::size_t) noexcept {
  // Large pages on Windows need SeLockMemoryPrivilege and MEM_LARGE_PAGES at reservation time.
  return std::make_error_code(std::errc::not_supported);
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
  if (ec.category() == os_category()) {
    switch (ec.value()) {
      case ERROR_NOT_ENOUGH_MEMORY:
        return "ERROR_NOT_ENOUGH_MEMORY";
      case ERROR_OUTOFMEMORY:
        return "ERROR_OUTOFMEMORY";
      case ERROR_COMMITMENT_LIMIT:
        return "ERROR_COMMITMENT_LIMIT";
      case ERROR_INVALID_PARAMETER:
        return "ERROR_INVALID_PARAMETER";
      case ERROR_INVALID_ADDRESS:
        return "ERROR_INVALID_ADDRESS";
      case ERROR_ACCESS_DENIED:
        return "ERROR_ACCESS_DENIED";
      case ERROR_NOT_SUPPORTED:
        return "ERROR_NOT_SUPPORTED";
      default:
        break;
    }
  }
  return "error " + std::to_string(ec.value());
}

std::error_code testing::out_of_memory_error() noexcept {
  return os_error(ERROR_NOT_ENOUGH_MEMORY);
}

// ---- process statistics ------------------------------------------------------------------------

namespace {
bool memory_counters(PROCESS_MEMORY_COUNTERS* pmc) noexcept {
  return ::GetProcessMemoryInfo(::GetCurrentProcess(), pmc, sizeof(*pmc)) != 0;
}
}  // namespace

std::size_t peak_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  PROCESS_MEMORY_COUNTERS pmc{};
  return memory_counters(&pmc) ? pmc.PeakWorkingSetSize : 0;
}

std::size_t current_rss() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  PROCESS_MEMORY_COUNTERS pmc{};
  return memory_counters(&pmc) ? pmc.WorkingSetSize : 0;
}

std::error_code reset_peak_rss() noexcept {
  return std::make_error_code(std::errc::not_supported);
}

double cpu_seconds() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  FILETIME created, exited, kernel, user;
  if (!::GetProcessTimes(::GetCurrentProcess(), &created, &exited, &kernel, &user)) return 0.0;
  auto sec = [](const FILETIME& ft) {
    return double((std::uint64_t(ft.dwHighDateTime) << 32) | ft.dwLowDateTime) * 1e-7;
  };
  return sec(kernel) + sec(user);
}

std::uint64_t minor_faults() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  PROCESS_MEMORY_COUNTERS pmc{};
  return memory_counters(&pmc) ? pmc.PageFaultCount : 0;  // soft and hard faults together
}

bool memory_limit(MemoryLimit*) noexcept {
  // A job object's memory limit makes VirtualAlloc(MEM_COMMIT) itself fail: nothing to read.
  return false;
}

std::size_t available_memory() noexcept {
  if (std::error_code ec; injected_failure(Op::stats, &ec)) return 0;
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof(status);
  if (!::GlobalMemoryStatusEx(&status)) return 0;
  return static_cast<std::size_t>(status.ullAvailPhys);
}

namespace {
// GetProcAddress returns FARPROC; going through void(*)() keeps -Wcast-function-type quiet.
template <class Fn>
Fn ntdll_function(const char* name) noexcept {
  HMODULE ntdll = ::GetModuleHandleA("ntdll.dll");
  if (ntdll == nullptr) return nullptr;
  return reinterpret_cast<Fn>(reinterpret_cast<void (*)()>(::GetProcAddress(ntdll, name)));
}
}  // namespace

std::string os_description() {
  // RtlGetVersion tells the truth where GetVersionEx is capped by the manifest. Pieces are
  // appended one by one: `"lit" + std::string&&` trips GCC 12's false -Wrestrict (PR 105329).
  std::string text = "Windows";
  using RtlGetVersionFn = LONG(WINAPI*)(OSVERSIONINFOW*);
  OSVERSIONINFOW v{};
  v.dwOSVersionInfoSize = sizeof(v);
  if (auto rtl_get_version = ntdll_function<RtlGetVersionFn>("RtlGetVersion");
      rtl_get_version && rtl_get_version(&v) == 0) {
    text += ' ';
    text += std::to_string(v.dwMajorVersion);
    text += '.';
    text += std::to_string(v.dwMinorVersion);
    text += '.';
    text += std::to_string(v.dwBuildNumber);
  }
  using WineVersionFn = const char*(CDECL*)();
  if (auto wine = ntdll_function<WineVersionFn>("wine_get_version")) {
    text += " (Wine ";
    text += wine();
    text += ')';
  }
  return text;
}

bool stderr_is_terminal() noexcept {
  DWORD mode = 0;
  return ::GetConsoleMode(::GetStdHandle(STD_ERROR_HANDLE), &mode) != 0;
}

// ---- processes ---------------------------------------------------------------------------------

std::string self_executable_path() {
  char buf[MAX_PATH * 4];
  DWORD n = ::GetModuleFileNameA(nullptr, buf, sizeof(buf));
  if (n == 0 || n >= sizeof(buf)) return {};
  return std::string(buf, n);
}

// Windows keeps a running .exe's file locked, so its path always names the running image.
std::string self_reexec_path() {
  return self_executable_path();
}

namespace {
// Quotes one argument the way the C runtime's argv parser undoes it.
void append_quoted(std::string& cmd, const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\"") == std::string::npos) {
    cmd += arg;
    return;
  }
  cmd += '"';
  std::size_t backslashes = 0;
  for (char c : arg) {
    if (c == '\\') {
      ++backslashes;
    } else if (c == '"') {
      cmd.append(backslashes * 2 + 1, '\\');
      cmd += '"';
      backslashes = 0;
    } else {
      cmd.append(backslashes, '\\');
      cmd += c;
      backslashes = 0;
    }
  }
  cmd.append(backslashes * 2, '\\');
  cmd += '"';
}
}  // namespace

std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out) {
  // 1. An inheritable pipe for the child's stdout; our read end stays private.
  SECURITY_ATTRIBUTES sa{};
  sa.nLength = sizeof(sa);
  sa.bInheritHandle = TRUE;
  HANDLE read_end = nullptr, write_end = nullptr;
  if (!::CreatePipe(&read_end, &write_end, &sa, 0)) return last_error();
  if (!::SetHandleInformation(read_end, HANDLE_FLAG_INHERIT, 0)) {
    std::error_code ec = last_error();
    ::CloseHandle(read_end);
    ::CloseHandle(write_end);
    return ec;
  }
  // 2. Start it.
  std::string cmd;
  append_quoted(cmd, path);
  for (const std::string& a : args) {
    cmd += ' ';
    append_quoted(cmd, a);
  }
  STARTUPINFOA si{};
  si.cb = sizeof(si);
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = ::GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = write_end;
  si.hStdError = ::GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION pi{};
  BOOL ok = ::CreateProcessA(path.c_str(), cmd.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr,
                             &si, &pi);
  std::error_code spawn_error = ok ? std::error_code{} : last_error();
  ::CloseHandle(write_end);
  if (!ok) {
    ::CloseHandle(read_end);
    return spawn_error;
  }
  // 3. Read until the child closes stdout, then collect its exit code.
  ProcessResult result;
  char buf[4096];
  DWORD n = 0;
  while (::ReadFile(read_end, buf, sizeof(buf), &n, nullptr) && n > 0)
    result.output.append(buf, n);
  ::CloseHandle(read_end);
  std::error_code ec;
  DWORD code = 0;
  if (::WaitForSingleObject(pi.hProcess, INFINITE) != WAIT_OBJECT_0 ||
      !::GetExitCodeProcess(pi.hProcess, &code)) {
    ec = last_error();
  }
  ::CloseHandle(pi.hThread);
  ::CloseHandle(pi.hProcess);
  if (ec) return ec;
  if (code >= 0xC0000000u) {
    result.exception = code;  // an unhandled exception (NTSTATUS), e.g. 0xC0000005
  } else {
    result.exited = true;
    result.exit_code = static_cast<int>(code);
  }
  *out = std::move(result);
  return {};
}

// ---- limits of the machine and the process, and fork ------------------------------------------

bool machine_memory(MachineMemory*) noexcept {
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
