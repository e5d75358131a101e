// Test runner: doctest, plus `--child NAME` to run one registered child scenario.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "support.hpp"

#if defined(_WIN32)
#include <windows.h>
#endif

namespace test {
namespace {
std::map<std::string, std::function<int()>>& children() {
  static std::map<std::string, std::function<int()>> map;
  return map;
}
}  // namespace

void register_child(const std::string& name, std::function<int()> body) {
  children()[name] = std::move(body);
}

int run_child_main(const std::string& name) {
  auto it = children().find(name);
  if (it == children().end()) {
    std::fprintf(stderr, "no child scenario named '%s'\n", name.c_str());
    return 99;
  }
  return it->second();
}

ProcessResult run_child(const std::string& name) {
  ProcessResult r;
  const std::error_code ec = run_process(self_reexec_path(), {"--child", name}, &r);
  REQUIRE_MESSAGE(!ec, "cannot run child " << name << ": " << ec.message());
  return r;
}

bool died_of_access_violation(const ProcessResult& r) {
#if defined(_WIN32)
  return r.exception == 0xC0000005u;  // STATUS_ACCESS_VIOLATION
#else
  return !r.exited && (r.signal == SIGSEGV || r.signal == SIGBUS);
#endif
}

std::string describe(const ProcessResult& r) {
  if (r.exited) return "exited with code " + std::to_string(r.exit_code);
  if (r.exception) return "died of exception " + std::to_string(r.exception);
  return "killed by signal " + std::to_string(r.signal);
}

void expect_fault_here() {
#if defined(_WIN32)
  // No error dialog, no debugger (Wine starts winedbg): the exception code becomes the exit code,
  // exactly what Windows reports for a process killed by an unhandled access violation.
  ::SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
  ::SetUnhandledExceptionFilter([](EXCEPTION_POINTERS* info) -> LONG {
    ::TerminateProcess(::GetCurrentProcess(), info->ExceptionRecord->ExceptionCode);
    return EXCEPTION_EXECUTE_HANDLER;
  });
#else
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
#endif
}

}  // namespace test

int main(int argc, char** argv) {
  // RESERVOIR_TEST_PAGE_SIZE=16384 runs everything as on a machine with 16 KiB pages (children
  // inherit the variable, so they agree with the parent).
  if (const char* forced = std::getenv("RESERVOIR_TEST_PAGE_SIZE")) {
    const auto bytes = static_cast<std::size_t>(std::strtoull(forced, nullptr, 10));
    if (!reservoir::pal::testing::set_page_size(bytes)) {
      std::fprintf(stderr, "RESERVOIR_TEST_PAGE_SIZE=%s: not a power-of-two multiple of %zu\n",
                   forced, reservoir::pal::page_size());
      return 98;
    }
  }
  // valgrind puts the stack low, so the automatic address-space budget (from the stack's address)
  // would be tiny: give default reservations the budget they have natively.
  if (test::under_valgrind()) reservoir::set_address_space_budget(std::size_t{1} << 46);
  if (argc == 3 && std::string_view(argv[1]) == "--child") {
    // A child ends with its parent, the test program, however that one ends.
    if (const std::error_code ec = reservoir::process::watch_parent()) {
      std::fprintf(stderr, "child %s: cannot watch its parent: %s\n", argv[2],
                   ec.message().c_str());
      return 97;
    }
    return test::run_child_main(argv[2]);
  }
  doctest::Context context(argc, argv);
  return context.run();
}
