// reservoir-bench: running one cell in a child process, and what decides whether it runs.
#include "tour.hpp"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <csignal>

#include "parse.hpp"

namespace reservoir::bench::tour {

reservoir::ArenaOptions arena_options(std::uint64_t granule, std::uint64_t max_step, bool prefault,
                                      bool huge) {
  reservoir::ArenaOptions o;
  o.commit_granule = granule;
  o.max_commit_step = max_step;
  o.prefault = prefault;
  o.huge_pages = huge;
  return o;
}

std::optional<reservoir::HugePages> parse_huge_pages(std::string_view mode) {
  if (mode == "auto") return reservoir::HugePages::automatic;
  if (mode == "on") return reservoir::HugePages::on;
  if (mode == "off") return reservoir::HugePages::off;
  return std::nullopt;
}

using SteadyClock = std::chrono::steady_clock;
const SteadyClock::time_point g_run_start = SteadyClock::now();

double seconds_since_start() {
  return std::chrono::duration<double>(SteadyClock::now() - g_run_start).count();
}

std::map<std::string, std::string> run_cell(const Config& cfg, const std::string& table,
                                            const std::string& container, const std::string& type,
                                            std::uint64_t n, std::uint64_t batch,
                                            std::string* status) {
  if (cfg.total_budget > 0 && seconds_since_start() > cfg.total_budget) {
    *status = fmt::format("skipped: the run's budget of {:g} s is spent", cfg.total_budget);
    return {};
  }
  rb::ProcessResult r;
  const std::vector<std::string> args = {"--child",
                                         table,
                                         container,
                                         type,
                                         std::to_string(n),
                                         std::to_string(cfg.granule),
                                         std::to_string(cfg.max_step),
                                         cfg.prefault ? "1" : "0",
                                         cfg.huge_pages,
                                         std::to_string(batch),
                                         fmt::format("{:.12g}", cfg.ns_per_tick),
                                         std::to_string(cfg.reserve_bytes)};
  if (std::error_code ec = rb::run_process(rb::self_reexec_path(), args, &r)) {
    *status = "cannot start child: " + pal::describe(ec);
    return {};
  }
  std::string line = r.output.substr(0, r.output.find('\n'));
  if (r.exited && r.exit_code == 0 && line.rfind("ok", 0) == 0) {
    *status = "ok";
    return rb::parse_fields(line);
  }
  if (line.rfind("error ", 0) == 0) {
    *status = line.substr(6);
#if !defined(_WIN32)
  } else if (r.signal == SIGALRM) {
#else
  } else if (r.exited && r.exit_code == rb::kTimedOutExitCode) {
#endif
    *status = fmt::format("timed out after {:g} s", std::ceil(cfg.cell_budget));
  } else if (r.signal) {
    *status = fmt::format("killed by signal {}{}", r.signal,
                          r.signal == 9 ? " (SIGKILL: out of memory?)" : "");
  } else if (r.exception) {
    *status = fmt::format("died of exception 0x{:08X}", r.exception);
  } else {
    *status = fmt::format("exited with code {}", r.exit_code);
  }
  return {};
}

// The most memory a cell may need: std::vector holds old and new buffers while it reallocates
// (up to 3x the data), the others about 1x; plus the heap every unique_ptr owns.
std::uint64_t estimate_peak(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule) {
  const double data = static_cast<double>(n) * static_cast<double>(rb::element_size(t));
  double factor = 1.0;
  // A growing vector holds old and new buffers while it copies; pmr resources that never free
  // (monotonic, or an arena where the old buffer is not the last block) keep them all: ~2x.
  if (c == rb::Container::vector || c == rb::Container::vector_populate ||
      c == rb::Container::pmr_arena || c == rb::Container::pmr_monotonic) {
    factor = 3.0;
  }
  if (c == rb::Container::deque) factor = 1.1;
  // In double throughout: n * bytes overflows 64 bits from n ~ 2e18 (and converting a double of
  // 2^64 or more to an integer is undefined), which would let a cell that cannot fit start.
  // --granule is the arena's: only the containers built on an Arena commit in its steps.
  const bool in_granules = c == rb::Container::dynarray || c == rb::Container::pmr_arena;
  const double need =
      data * factor + static_cast<double>(n) * static_cast<double>(rb::owned_heap_per_element(t)) +
      (in_granules ? static_cast<double>(granule) : 0.0) + static_cast<double>(64u << 20);
  constexpr double kMax = 18446744073709549568.0;  // the largest double below 2^64
  return need >= kMax ? UINT64_MAX : static_cast<std::uint64_t>(need);
}

// Returns "" if the cell can run here (its contender exists, its data fits in memory), else the
// reason to skip it.
std::string skip_reason(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule) {
  if (c == rb::Container::floor_huge) {
    if (!pal::transparent_huge_pages()) return "skipped: no transparent huge pages here";
    // Below one huge page the floor would time a 2 MiB page for a few bytes of data.
    if (static_cast<double>(n) * static_cast<double>(rb::element_size(t)) < double(2 << 20)) {
      return "skipped: less than one huge page of data";
    }
  }
  const std::uint64_t need = estimate_peak(c, t, n, granule);
  const std::uint64_t avail = rb::available_memory();
  if (avail != 0 && static_cast<double>(need) > 0.85 * static_cast<double>(avail)) {
    return fmt::format("skipped: needs ~{}, {} available", format_bytes(need), format_bytes(avail));
  }
  return {};
}

std::uint64_t idle_peak(const Config& cfg) {
  std::vector<std::uint64_t> peaks;
  for (int i = 0; i < 3; ++i) {
    std::string status;
    auto f = run_cell(cfg, "memory", "none", "none", 0, 1, &status);
    if (status == "ok") peaks.push_back(std::stoull(f["peak"]));
  }
  if (peaks.empty()) return 0;
  std::sort(peaks.begin(), peaks.end());
  return peaks[peaks.size() / 2];
}

double median(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
}

void summarize(Result& r, std::uint64_t n) {
  if (r.status != "ok" || r.samples.empty()) return;
  // A time that is not a finite non-negative number is a failed measurement, never a result: the
  // result files hold finite numbers only.
  if (!std::all_of(r.samples.begin(), r.samples.end(),
                   [](double s) { return std::isfinite(s) && s >= 0; })) {
    r.status = "error: a repetition's time is not a finite number";
    return;
  }
  r.seconds = median(r.samples);
  r.seconds_min = *std::min_element(r.samples.begin(), r.samples.end());
  r.seconds_max = *std::max_element(r.samples.begin(), r.samples.end());
  r.eps = r.seconds > 0 ? static_cast<double>(n) / r.seconds : 0;
  r.unstable =
      r.samples.size() > 1 && r.seconds_min > 0 && r.seconds_max / r.seconds_min > kUnstableSpread;
}

std::uint64_t batch_for(std::uint64_t n, std::uint64_t elements) {
  return n >= elements / 2 ? 1 : elements / n + 1;
}

const Result* find(const std::vector<Result>& rs, const std::string& table, const std::string& c,
                   const std::string& t, std::uint64_t n) {
  for (const Result& r : rs) {
    if (r.table == table && r.container == c && r.type == t && r.size == n) return &r;
  }
  return nullptr;
}

}  // namespace reservoir::bench::tour
