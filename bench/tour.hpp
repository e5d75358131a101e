// reservoir-bench's tour: what its tables share. Every measurement runs in a fresh child process
// (this same binary, re-executed with --child), so each peak is that cell's own and a cell that
// dies is reported as such while the bench goes on. Each table (table_*.cpp) is a Table: it runs
// its cells into a list of Results and prints them; bench_main.cpp parses the options and
// dispatches.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <reservoir/reservoir.hpp>

#include "parse.hpp"
#include "platform.hpp"
#include "table_mixed.hpp"
#include "workloads.hpp"

namespace reservoir::bench::tour {

namespace rb = reservoir::bench;
namespace pal = reservoir::pal;
using reservoir::format_bytes;

// ---- configuration ------------------------------------------------------------------------------

struct Config {
  std::vector<std::uint64_t> sizes;
  std::vector<rb::Container> containers;
  std::vector<rb::Type> types;
  int reps = 3;
  std::uint64_t granule = reservoir::kDefaultCommitGranule;
  std::uint64_t max_step = reservoir::kDefaultMaxCommitStep;
  std::uint64_t reserve_bytes = 0;  // DynArray reservation; 0 = the library default
  bool prefault = reservoir::ArenaOptions{}.prefault;  // the library's defaults
  std::string huge_pages = "auto";  // auto | on | off: reservoir::set_huge_pages in every cell
  std::vector<std::string> tables = {"memory",  "throughput", "latency",  "concurrent",
                                     "collatz", "mixed",      "timeline", "many"};
  std::vector<std::uint64_t> threads = {1, 2, 4};  // the concurrent table; empty: skip it
  rb::mixed::TableOptions mixed;                   // the mixed table
  std::uint64_t many_arrays = 10'000;              // the many-arrays table: arrays alive at once
  // Throughput and latency cells of fewer elements repeat their build until about this many
  // elements are appended (throughput) or a tenth of it (latency): enough for a stable time.
  std::uint64_t batch_elements = 2'000'000;
  std::string json, csv, markdown;
  bool quiet = false;
  double cell_budget = 60;  // seconds one child may run before it is killed
  double total_budget = 0;  // seconds for the whole run (0: none); later cells are skipped
  double ns_per_tick = 1.0;
  std::uint64_t idle_peak = 0;  // peak memory of an idle child, subtracted from memory cells
  std::uint64_t overhead_ticks = 0;
};

reservoir::ArenaOptions arena_options(std::uint64_t granule, std::uint64_t max_step, bool prefault,
                                      bool huge);
// "auto" / "on" / "off" as reservoir::HugePages; nullopt for anything else.
std::optional<reservoir::HugePages> parse_huge_pages(std::string_view mode);

// ---- results ------------------------------------------------------------------------------------

struct Result {
  Result(std::string tbl, std::string cont, std::string typ, std::uint64_t n)
      : table(std::move(tbl)), container(std::move(cont)), type(std::move(typ)), size(n) {}
  std::string table, container, type;
  std::uint64_t size = 0;
  std::uint64_t threads = 0;  // concurrent table only
  std::string status = "ok";
  bool unstable = false;                         // max/min across repetitions above kUnstableSpread
  std::uint64_t peak_bytes = 0, data_bytes = 0;  // memory
  double seconds = 0, seconds_min = 0, seconds_max = 0, eps = 0;  // throughput
  std::vector<double> samples;                                    // throughput
  std::int64_t kernel_calls = -1;     // throughput: pal's OS calls per build (dynarray; -1: none)
  std::uint64_t huge_page_bytes = 0;  // throughput: AnonHugePages once built (largest rep)
  std::map<std::string, std::uint64_t> latency;        // latency: min p50 ... d6
  std::vector<std::array<std::uint64_t, 3>> timeline;  // timeline: elements, rss, peak rss
  std::uint64_t arrays = 0;                            // many, mixed: arrays alive at the end
  double destroy_seconds = 0;                          // many: median time to destroy them all
  std::vector<double> destroy_samples;                 // many
  double warm_seconds = 0;                             // bulk: median time into warm memory
  std::vector<double> warm_samples;                    // bulk
  double rebuild_seconds = 0, redestroy_seconds = 0;   // many: the second round, recycled memory
  std::vector<double> rebuild_samples, redestroy_samples;  // many
  double churn_ns = 0, churn2_ns = 0;  // many: create-fill-destroy one array, 1 and 2 threads
  std::vector<double> churn_samples, churn2_samples;  // many
  std::int64_t churn_rss_growth = 0;  // many: the largest growth of RSS over the churn (0: none)
  std::string checksum;               // mixed: the final contents' checksum
  std::uint64_t elements = 0;         // mixed: elements at the end
  std::array<double, rb::mixed::kActions> action_seconds{};        // mixed: median per action
  std::array<std::uint64_t, rb::mixed::kActions> action_counts{};  // mixed
};

// The status of a mixed cell whose final contents differ from another container's: the run
// fails (exit 1), since one of the containers computed something else.
inline constexpr const char* kMixedDisagreement = "error: containers disagree";

// True if a cell's status says it failed (an error, a crash, a child that could not start), not
// that it was skipped or stopped by a budget, which the run chose: a failed cell makes the run
// exit 1.
inline bool cell_failed(const std::string& status) {
  return status != "ok" && status.rfind("skipped", 0) != 0 && status.rfind("timed out", 0) != 0;
}

// A cell whose slowest repetition took more than this times its fastest is marked unstable.
inline constexpr double kUnstableSpread = 1.5;

// A single timing below this (one clock read or two: destroying arrays that own nothing) measures
// nothing a ratio could stand on: the tables print "below resolution" instead of a ratio.
inline constexpr double kTimeResolution = 1e-6;

// A peak of less data than this is within the noise of an idle child's own peak (which moves by
// tens to hundreds of KiB between runs): the memory tables print "below resolution" for it.
inline constexpr std::uint64_t kPeakResolution = std::uint64_t{256} << 10;

// Every repetition of the cells still "ok", interleaved (each repetition runs every contender
// once, so that drift hits all alike): each(cell, rep).
template <class Each>
void run_reps(const Config& cfg, std::vector<Result>& cells, Each each) {
  for (int rep = 0; rep < cfg.reps; ++rep) {
    for (Result& r : cells) {
      if (r.status == "ok") each(r, rep);
    }
  }
}

// The median of samples (0 if none).
double median(std::vector<double> samples);
// Median, min and max of the repetitions, and elements per second.
void summarize(Result& r, std::uint64_t n);

// The result of table / container / type / size in rs, or nullptr.
const Result* find(const std::vector<Result>& rs, const std::string& table, const std::string& c,
                   const std::string& t, std::uint64_t n);

// ---- running cells ------------------------------------------------------------------------------

double seconds_since_start();

// Runs one child; returns its "ok ..." fields, or sets status to what went wrong. A child that
// outlives cfg.cell_budget is killed ("timed out after N s"); once cfg.total_budget is spent, no
// more children start ("skipped: ...").
std::map<std::string, std::string> run_cell(const Config& cfg, const std::string& table,
                                            const std::string& container, const std::string& type,
                                            std::uint64_t n, std::uint64_t batch,
                                            std::string* status);

// The most memory a cell may need (saturating: sizes near 2^64 give UINT64_MAX, never a wrapped
// small number), and "" if it fits in memory, else the reason to skip it.
std::uint64_t estimate_peak(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule);
std::string skip_reason(rb::Container c, rb::Type t, std::uint64_t n, std::uint64_t granule);

// The median peak memory of three idle children.
std::uint64_t idle_peak(const Config& cfg);

// How many builds one throughput child of n elements does: enough for about `elements` appends
// (Config::batch_elements), so that tiny sizes are timed over milliseconds.
std::uint64_t batch_for(std::uint64_t n, std::uint64_t elements);

// The child side: `--child TABLE ...` (see tour_child.cpp).
int child_main(int argc, char** argv);

// A one-line progress display on stderr, "[n/m, elapsed] what", while a table runs: only on a
// terminal and without --quiet.
class Progress {
 public:
  Progress(bool enabled, std::size_t cells)
      : enabled_(enabled && rb::stderr_is_terminal()), cells_(cells) {}
  void show(const std::string& what) {
    ++shown_;
    if (enabled_) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu, %.0f s] %s", shown_, cells_, seconds_since_start(),
                   what.c_str());
    }
  }
  void done() {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  std::size_t cells_;
  std::size_t shown_ = 0;
};

// ---- printing -----------------------------------------------------------------------------------

std::string format_ns(double ns);
std::string format_seconds(double s);
// "2.00x faster" / "1.50x slower" / "-"; with Results, " ?" appended when either is unstable: no
// ratio is printed against a shaky baseline without saying so.
std::string speed_ratio(double base, double mine);
std::string speed_ratio(const Result* base, const Result& mine);
double ratio_value(const Result* base, const Result& mine);
// speed_ratio of two single timings, "below resolution" if either is under kTimeResolution.
std::string timed_ratio(double base_seconds, double mine_seconds);
// "38.2 MiB (1.00x)": a peak and its ratio to the data, or "below resolution" for data under
// kPeakResolution.
std::string peak_cell(std::uint64_t peak_bytes, std::uint64_t data_bytes);

struct Context {
  std::vector<std::pair<std::string, std::string>> fields;
};
Context make_context(const Config& cfg, std::uint64_t idle);
bool is_debug_build();
void print_header(const Context& ctx);
// The closing summary: one line per table that ran, its headline ratios, the fault cost, and the
// command that plots the run (summary.cpp).
void print_summary(const Config& cfg, const Context& ctx, const std::vector<Result>& rs);

// The result files. Each returns "" when the file was written completely, else what went wrong
// (the OS's words), so that a result is never lost silently.
std::string write_json(const std::string& path, const Context& ctx, const std::vector<Result>& rs);
std::string write_csv(const std::string& path, const std::vector<Result>& rs);
std::string write_markdown(const std::string& path, const Config& cfg, const Context& ctx,
                           const std::vector<Result>& rs);

// Checks before the first cell that path can be written (an existing file is opened for writing
// without truncating it; a new one is created and removed again): "" or why not.
std::string check_writable(const std::string& path);

// `reservoir-bench compare BASE.json NEW.json [--threshold PCT]` (compare.cpp).
int compare_main(int argc, char** argv);

// ---- the tables ---------------------------------------------------------------------------------

// One table of the tour: runs its cells, appending to results, and prints them.
struct Table {
  const char* name;
  void (*run)(const Config& cfg, std::vector<Result>& results);
  void (*print)(const Config& cfg, const std::vector<Result>& results);
};
extern const Table kMemoryTable, kThroughputTable, kLatencyTable, kConcurrentTable, kCollatzTable,
    kTimelineTable, kMixedTable, kManyArraysTable, kBulkTable;
// The bulk table's operations and floors, in its order (for --help).
std::vector<std::string> bulk_operation_names();
// The floor (memset or memcpy) a bulk operation is measured against; "" for an unknown name.
std::string bulk_floor(std::string_view op);
// The bulk table's child: one operation on n ints, "ok seconds=COLD warm=WARM".
std::string bulk_child(std::string_view op, std::uint64_t n);

// The sizes the concurrent and timeline tables use (derived from --sizes).
std::uint64_t concurrent_size(const Config& cfg);
std::uint64_t timeline_size(const Config& cfg);

}  // namespace reservoir::bench::tour
