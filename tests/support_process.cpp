// The tests' own child processes: start this very test program again, capture its stdout, and say
// how it ended. What a new OS needs for the library's tests to build; the bench has its own
// (bench/platform.hpp), which the tests do not link.
#include "support.hpp"

#include <utility>

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#elif defined(__FreeBSD__)
#include <sys/types.h>
// sys/types.h first: sys/sysctl.h needs its types.
#include <sys/sysctl.h>
#endif
extern char** environ;
#endif

namespace test {

#if defined(_WIN32)

namespace {

std::error_code last_error() {
  return {static_cast<int>(::GetLastError()), std::system_category()};
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

}  // namespace

// Windows keeps a running .exe's file locked, so its path always names the running image.
std::string self_reexec_path() {
  char buf[MAX_PATH * 4];
  const DWORD n = ::GetModuleFileNameA(nullptr, buf, sizeof(buf));
  if (n == 0 || n >= sizeof(buf)) return {};
  return std::string(buf, n);
}

bool under_wine() {
  HMODULE ntdll = ::GetModuleHandleA("ntdll.dll");
  return ntdll != nullptr && ::GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out) {
  SECURITY_ATTRIBUTES sa{};
  sa.nLength = sizeof(sa);
  sa.bInheritHandle = TRUE;
  HANDLE read_end = nullptr, write_end = nullptr;
  if (!::CreatePipe(&read_end, &write_end, &sa, 0)) return last_error();
  if (!::SetHandleInformation(read_end, HANDLE_FLAG_INHERIT, 0)) {
    const std::error_code ec = last_error();
    ::CloseHandle(read_end);
    ::CloseHandle(write_end);
    return ec;
  }
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
  // ERROR_INTERNAL_ERROR is the system's own failure (Wine, now and then, when processes are
  // started many times in a row): no process was created, so a few more tries are safe.
  BOOL ok = FALSE;
  for (DWORD attempt = 0;; ++attempt) {
    ok = ::CreateProcessA(path.c_str(), cmd.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr,
                          &si, &pi);
    if (ok || ::GetLastError() != ERROR_INTERNAL_ERROR || attempt == 4) break;
    ::Sleep(10 * (attempt + 1));
  }
  const std::error_code spawn_error = ok ? std::error_code{} : last_error();
  ::CloseHandle(write_end);
  if (!ok) {
    ::CloseHandle(read_end);
    return spawn_error;
  }
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

#else  // POSIX

namespace {

std::error_code os_error(int value) {
  return {value, std::generic_category()};
}

std::string executable_path() {
#if defined(__linux__)
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
#elif defined(__APPLE__)
  char buf[4096];
  std::uint32_t size = sizeof(buf);
  return _NSGetExecutablePath(buf, &size) == 0 ? std::string(buf) : std::string();
#elif defined(__FreeBSD__)
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PATHNAME, -1};
  char buf[4096];
  std::size_t len = sizeof(buf);
  if (::sysctl(mib, 4, buf, &len, nullptr, 0) != 0 || len == 0) return {};
  return std::string(buf);
#else
  return {};
#endif
}

}  // namespace

std::string self_reexec_path() {
  const std::string path = executable_path();
#if defined(__linux__)
  // "/proc/self/exe" is the running image even after its file was replaced (a rebuild during a
  // run), but only when it is the program itself: under valgrind it is valgrind's tool.
  struct stat link_target{}, reported{};
  if (path.empty() ||
      (::stat("/proc/self/exe", &link_target) == 0 && ::stat(path.c_str(), &reported) == 0 &&
       link_target.st_dev == reported.st_dev && link_target.st_ino == reported.st_ino)) {
    return "/proc/self/exe";
  }
#endif
  return path;
}

bool under_wine() {
  return false;
}

std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out) {
  int fds[2];
  if (::pipe(fds) != 0) return os_error(errno);
  for (int fd : fds) {
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      const std::error_code ec = os_error(errno);
      ::close(fds[0]);
      ::close(fds[1]);
      return ec;
    }
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  int rc = ::posix_spawn_file_actions_init(&actions);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return os_error(rc);
  }
  ProcessResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return os_error(errno);
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  *out = std::move(result);
  return {};
}

#endif

}  // namespace test
