// The bench's platform layer for Windows. NOMINMAX and WIN32_LEAN_AND_MEAN come from
// bench/CMakeLists.txt.
#include <windows.h>

#include <string>

#include "platform.hpp"

namespace reservoir::bench {
namespace {

// GetProcAddress returns FARPROC; going through void(*)() keeps -Wcast-function-type quiet.
template <class Fn>
Fn ntdll_function(const char* name) noexcept {
  HMODULE ntdll = ::GetModuleHandleA("ntdll.dll");
  if (ntdll == nullptr) return nullptr;
  return reinterpret_cast<Fn>(reinterpret_cast<void (*)()>(::GetProcAddress(ntdll, name)));
}

}  // namespace

std::size_t anon_huge_pages() noexcept {
  return 0;  // Windows has no transparent huge pages
}

std::size_t available_memory() noexcept {
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof(status);
  if (!::GlobalMemoryStatusEx(&status)) return 0;
  return static_cast<std::size_t>(status.ullAvailPhys);
}

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

}  // namespace reservoir::bench
