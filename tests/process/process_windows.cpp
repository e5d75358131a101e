// The process layer for Windows. NOMINMAX and WIN32_LEAN_AND_MEAN come from its CMakeLists.txt.
#include <windows.h>
// windows.h first: psapi.h needs its types.
#include <psapi.h>

#include <chrono>
#include <cstdlib>  // _putenv_s
#include <thread>
#include <utility>

#include "process.hpp"

namespace reservoir::process {
namespace {

std::error_code last_error() noexcept {
  return {static_cast<int>(::GetLastError()), std::system_category()};
}

HANDLE handle_of(std::intptr_t h) noexcept {
  return reinterpret_cast<HANDLE>(h);
}

void close_handle(std::intptr_t& h) noexcept {
  if (h != -1) ::CloseHandle(handle_of(h));
  h = -1;
}

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

// The job every child is put in: it kills them when its last handle closes, and only this
// process holds one (not inheritable), so they end with it whatever ends it. Children may leave
// a job of ours for their own (BREAKAWAY_OK): a child's job then kills its own children as it
// ends. Made by the first start(); never closed (the OS closes it as this process ends).
HANDLE children_job(std::error_code* ec) {
  static const HANDLE job = [] {
    HANDLE j = ::CreateJobObjectA(nullptr, nullptr);
    if (j == nullptr) return j;
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
    limits.BasicLimitInformation.LimitFlags =
        JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_BREAKAWAY_OK;
    if (!::SetInformationJobObject(j, JobObjectExtendedLimitInformation, &limits, sizeof(limits))) {
      const DWORD error = ::GetLastError();
      ::CloseHandle(j);
      ::SetLastError(error);
      return HANDLE{nullptr};
    }
    return j;
  }();
  if (job == nullptr) *ec = last_error();
  return job;
}

}  // namespace

// ---- this process ------------------------------------------------------------------------------

std::size_t peak_rss() noexcept {
  PROCESS_MEMORY_COUNTERS pmc{};
  if (!::GetProcessMemoryInfo(::GetCurrentProcess(), &pmc, sizeof(pmc))) return 0;
  return pmc.PeakWorkingSetSize;
}

std::size_t proc_kib_line(const char*, const char*) noexcept {
  return 0;  // no /proc
}

long this_process_id() noexcept {
  return static_cast<long>(::GetCurrentProcessId());
}

std::string self_executable_path() {
  char buf[MAX_PATH * 4];
  const DWORD n = ::GetModuleFileNameA(nullptr, buf, sizeof(buf));
  if (n == 0 || n >= sizeof(buf)) return {};
  return std::string(buf, n);
}

// Windows keeps a running .exe's file locked, so its path always names the running image.
std::string self_reexec_path() {
  return self_executable_path();
}

bool under_wine() {
  HMODULE ntdll = ::GetModuleHandleA("ntdll.dll");
  return ntdll != nullptr && ::GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

bool set_environment(const char* name, const std::string& value) {
  return ::_putenv_s(name, value.c_str()) == 0;
}

void end_after(double seconds) {
  if (!(seconds > 0)) return;
  // No flush of stdout first: a hung thread may hold its lock. The parent needs only the code.
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    ::TerminateProcess(::GetCurrentProcess(), kTimedOutExitCode);
  }).detach();
}

// ---- children ----------------------------------------------------------------------------------

std::error_code Child::start(const std::string& path, const std::vector<std::string>& args) {
  if (id_ != 0) return std::make_error_code(std::errc::device_or_resource_busy);
  std::error_code ec;
  HANDLE job = children_job(&ec);
  if (ec) return ec;
  // 1. An inheritable pipe for the child's stdout; our read end stays private.
  SECURITY_ATTRIBUTES sa{};
  sa.nLength = sizeof(sa);
  sa.bInheritHandle = TRUE;
  HANDLE read_end = nullptr, write_end = nullptr;
  if (!::CreatePipe(&read_end, &write_end, &sa, 0)) return last_error();
  if (!::SetHandleInformation(read_end, HANDLE_FLAG_INHERIT, 0)) {
    ec = last_error();
    ::CloseHandle(read_end);
    ::CloseHandle(write_end);
    return ec;
  }
  // 2. Start it suspended, so it runs no instruction outside the job.
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
  // Out of the job this process is in, if it allows that; otherwise nested in it.
  DWORD flags = CREATE_SUSPENDED | CREATE_BREAKAWAY_FROM_JOB;
  // ERROR_INTERNAL_ERROR is the system's own failure, not the request's: Wine returns it now and
  // then when processes are started many times in a row (a bench run starts hundreds). No
  // process was created then, so starting it again is safe: a few tries, a little further apart
  // each time.
  BOOL ok = FALSE;
  for (DWORD attempt = 0;; ++attempt) {
    ok = ::CreateProcessA(path.c_str(), cmd.data(), nullptr, nullptr, TRUE, flags, nullptr, nullptr,
                          &si, &pi);
    if (!ok && ::GetLastError() == ERROR_ACCESS_DENIED && (flags & CREATE_BREAKAWAY_FROM_JOB)) {
      flags &= ~static_cast<DWORD>(CREATE_BREAKAWAY_FROM_JOB);
      continue;
    }
    if (ok || ::GetLastError() != ERROR_INTERNAL_ERROR || attempt == 4) break;
    ::Sleep(10 * (attempt + 1));
  }
  ec = ok ? std::error_code{} : last_error();
  ::CloseHandle(write_end);
  if (!ok) {
    ::CloseHandle(read_end);
    return ec;
  }
  // 3. Into the job, then let it run. A child that cannot be put there does not run at all.
  if (!::AssignProcessToJobObject(job, pi.hProcess)) {
    ec = last_error();
  } else if (::ResumeThread(pi.hThread) == static_cast<DWORD>(-1)) {
    ec = last_error();
  }
  ::CloseHandle(pi.hThread);
  if (ec) {
    ::TerminateProcess(pi.hProcess, 1);
    ::WaitForSingleObject(pi.hProcess, INFINITE);
    ::CloseHandle(pi.hProcess);
    ::CloseHandle(read_end);
    return ec;
  }
  id_ = static_cast<long>(pi.dwProcessId);
  process_ = reinterpret_cast<std::intptr_t>(pi.hProcess);
  output_ = reinterpret_cast<std::intptr_t>(read_end);
  return {};
}

std::error_code Child::wait(ProcessResult* out) {
  if (id_ == 0) return std::make_error_code(std::errc::no_child_process);
  // Read until the child closes stdout, then collect its exit code.
  ProcessResult result;
  char buf[4096];
  DWORD n = 0;
  while (::ReadFile(handle_of(output_), buf, sizeof(buf), &n, nullptr) && n > 0)
    result.output.append(buf, n);
  close_handle(output_);
  std::error_code ec;
  DWORD code = 0;
  if (::WaitForSingleObject(handle_of(process_), INFINITE) != WAIT_OBJECT_0 ||
      !::GetExitCodeProcess(handle_of(process_), &code)) {
    ec = last_error();
  }
  close_handle(process_);
  id_ = 0;
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

std::error_code Child::kill() noexcept {
  if (id_ == 0) return std::make_error_code(std::errc::no_child_process);
  if (!::TerminateProcess(handle_of(process_), 1)) return last_error();
  return {};
}

std::error_code kill_process(long id) noexcept {
  HANDLE h = ::OpenProcess(PROCESS_TERMINATE, FALSE, static_cast<DWORD>(id));
  if (h == nullptr) return last_error();
  std::error_code ec;
  if (!::TerminateProcess(h, 1)) ec = last_error();
  ::CloseHandle(h);
  return ec;
}

bool process_running(long id) {
  if (id <= 0) return false;
  HANDLE h = ::OpenProcess(SYNCHRONIZE, FALSE, static_cast<DWORD>(id));
  if (h == nullptr) return false;  // no such process (ERROR_INVALID_PARAMETER)
  const bool running = ::WaitForSingleObject(h, 0) == WAIT_TIMEOUT;
  ::CloseHandle(h);
  return running;
}

std::error_code end_children_on_signals() {
  return {};  // no such signals; the job covers every end
}

std::error_code watch_parent() {
  return {};  // the parent's job kills this process
}

}  // namespace reservoir::process
