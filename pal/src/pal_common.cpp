// OS-independent parts of pal: the capabilities struct, the fault-injection seam and error
// descriptions.
#include <array>
#include <atomic>
#include <mutex>

#include "pal_internal.hpp"

namespace reservoir::pal {
namespace {

struct ArmedOp {
  std::atomic<bool> armed{false};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<void (*)()> hook{nullptr};  // testing::on_call
  std::uint64_t skip = 0;                 // guarded by mutex
  std::uint64_t count = 0;                // guarded by mutex
  std::error_code error;                  // guarded by mutex
};

std::atomic<std::size_t> g_page_size_override{0};
std::atomic<int> g_thp_override{-1};
std::atomic<bool> g_refuse_open{false};
std::atomic<bool> g_refuse_guard_install{false};
std::atomic<bool> g_skip_conventional_cgroup_mounts{false};
std::atomic<bool> g_refuse_dontdump{false};
// testing::set_machine_memory(): the machine described (total 0: none), and the resident set
// when it was set. Guarded by g_mutex.
std::atomic<bool> g_fake_machine{false};
MachineMemory g_machine;
std::size_t g_machine_rss = 0;

constexpr std::size_t kOps = static_cast<std::size_t>(Op::count_);
std::array<ArmedOp, kOps> g_ops;
std::mutex g_mutex;

ArmedOp& armed_op(Op op) noexcept {
  return g_ops[static_cast<std::size_t>(op)];
}

}  // namespace

Capabilities capabilities() noexcept {
  Capabilities c;
  c.page_size = page_size();
  c.allocation_granularity = allocation_granularity();
  c.transparent_huge_pages = transparent_huge_pages();
  c.host_reclaims_free_pages = c.transparent_huge_pages && host_reclaims_free_pages();
#if defined(__linux__)
  c.size_free_reservations = true;
#endif
  return c;
}

namespace detail {

std::string error_name_in(int value, const ErrorName* names, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (names[i].value == value) return names[i].name;
  }
  return "error " + std::to_string(value);
}

}  // namespace detail

namespace detail {

std::size_t page_size_override() noexcept {
  return g_page_size_override.load(std::memory_order_relaxed);
}

bool injected_failure(Op op, std::error_code* ec) noexcept {
  ArmedOp& s = armed_op(op);
  s.calls.fetch_add(1, std::memory_order_relaxed);
  if (void (*hook)() = s.hook.load(std::memory_order_acquire)) hook();
  if (!s.armed.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(g_mutex);
  if (s.count == 0) return false;
  if (s.skip > 0) {
    --s.skip;
    return false;
  }
  --s.count;
  if (s.count == 0) s.armed.store(false, std::memory_order_relaxed);
  *ec = s.error;
  return true;
}

bool machine_memory_override(MachineMemory* out) noexcept {
  if (!g_fake_machine.load(std::memory_order_relaxed)) return false;
  MachineMemory m;
  std::size_t rss_then = 0;
  {
    std::lock_guard lock(g_mutex);
    m = g_machine;
    rss_then = g_machine_rss;
  }
  const std::size_t rss = current_rss();
  const std::size_t grown = rss > rss_then ? rss - rss_then : 0;
  m.available = m.available > grown ? m.available - grown : 0;
  *out = m;
  return true;
}

int transparent_huge_pages_override() noexcept {
  return g_thp_override.load(std::memory_order_relaxed);
}

}  // namespace detail

namespace testing {

void set_transparent_huge_pages(int mode) noexcept {
  g_thp_override.store(mode < 0 ? -1 : (mode != 0 ? 1 : 0), std::memory_order_relaxed);
}

void refuse_open_reservations(bool refuse) noexcept {
  g_refuse_open.store(refuse, std::memory_order_relaxed);
}

bool open_reservations_refused() noexcept {
  return g_refuse_open.load(std::memory_order_relaxed);
}

void refuse_guard_install(bool refuse) noexcept {
  g_refuse_guard_install.store(refuse, std::memory_order_relaxed);
}

bool guard_install_refused() noexcept {
  return g_refuse_guard_install.load(std::memory_order_relaxed);
}

void skip_conventional_cgroup_mounts(bool skip) noexcept {
  g_skip_conventional_cgroup_mounts.store(skip, std::memory_order_relaxed);
}

bool conventional_cgroup_mounts_skipped() noexcept {
  return g_skip_conventional_cgroup_mounts.load(std::memory_order_relaxed);
}

void refuse_dontdump(bool refuse) noexcept {
  g_refuse_dontdump.store(refuse, std::memory_order_relaxed);
}

bool dontdump_refused() noexcept {
  return g_refuse_dontdump.load(std::memory_order_relaxed);
}

void fail(Op op, std::uint64_t skip, std::uint64_t count, std::error_code error) noexcept {
  std::lock_guard lock(g_mutex);
  ArmedOp& s = armed_op(op);
  s.skip = skip;
  s.count = count;
  s.error = error;
  s.armed.store(count > 0, std::memory_order_relaxed);
}

void clear() noexcept {
  std::lock_guard lock(g_mutex);
  for (ArmedOp& s : g_ops) {
    s.count = 0;
    s.skip = 0;
    s.armed.store(false, std::memory_order_relaxed);
  }
}

std::uint64_t calls(Op op) noexcept {
  return armed_op(op).calls.load(std::memory_order_relaxed);
}

void on_call(Op op, void (*hook)()) noexcept {
  armed_op(op).hook.store(hook, std::memory_order_release);
}

void set_machine_memory(std::size_t total, std::size_t available) noexcept {
  const std::size_t rss = total != 0 ? current_rss() : 0;
  std::lock_guard lock(g_mutex);
  g_machine = MachineMemory{};
  g_machine.total = total;
  g_machine.available = available;
  g_machine.overcommit = 0;
  g_machine_rss = rss;
  g_fake_machine.store(total != 0, std::memory_order_relaxed);
}

bool set_page_size(std::size_t bytes) noexcept {
  if (bytes == 0) {
    g_page_size_override.store(0, std::memory_order_relaxed);
    return true;
  }
  g_page_size_override.store(0, std::memory_order_relaxed);
  const std::size_t real = page_size();
  if ((bytes & (bytes - 1)) != 0 || bytes % real != 0) return false;
  g_page_size_override.store(bytes, std::memory_order_relaxed);
  return true;
}

}  // namespace testing

std::string describe(const std::error_code& ec) {
  std::string text = ec.message();
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == '.' || text.back() == ' ')) {
    text.pop_back();  // FormatMessage ends its text with ".\r\n"
  }
  return text + " (" + error_name(ec) + ")";
}

}  // namespace reservoir::pal
