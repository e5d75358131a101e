// reservoir-bench table 8: many small arrays alive at once (many_arrays.hpp), built, then all
// destroyed; build and destruction timed apart, and the peak memory of the whole child.
#include "tour.hpp"

#include <algorithm>
#include <string_view>

#include "many_arrays.hpp"

namespace reservoir::bench::tour {

namespace {

// Elements per array: 20 (the small arrays of a graph's adjacency lists, where a bound or
// std::vector is the choice), 1e2, 1e3 and 1e4, as far as --many-arrays of them stay within the
// largest --sizes (the quick tour's 1e4 arrays and 1e7: 20, 1e2 and 1e3).
std::vector<std::uint64_t> per_array_sizes(const Config& cfg) {
  const std::uint64_t largest = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
  std::vector<std::uint64_t> out;
  for (std::uint64_t per : {20u, 100u, 1'000u, 10'000u}) {
    if (per * cfg.many_arrays <= largest || out.empty()) out.push_back(per);
  }
  return out;
}

void run_many(const Config& cfg, std::vector<Result>& out) {
  const std::vector<std::uint64_t> sizes = per_array_sizes(cfg);
  Progress progress(!cfg.quiet, sizes.size() * std::size(rb::kManyArraysContainers) *
                                    static_cast<std::size_t>(cfg.reps));
  for (std::uint64_t per : sizes) {
    std::vector<Result> cells;
    for (const char* c : rb::kManyArraysContainers) {
      Result r("many", c, "int", per);
      r.arrays = cfg.many_arrays;
      if (std::string why = skip_reason(rb::Container::vector, rb::Type::int_,
                                        per * cfg.many_arrays, cfg.granule);
          !why.empty()) {
        r.status = why;
      }
#if defined(_WIN32)
      if (std::string_view(c) == "page_floor")
        r.status = "skipped: POSIX only (one read-write mapping, nothing committed per array)";
#endif
      cells.push_back(std::move(r));
    }
    std::string checksum;  // every contender must build the same elements
    for (int rep = 0; rep < cfg.reps; ++rep) {
      for (Result& r : cells) {
        if (r.status != "ok") continue;
        progress.show(fmt::format("many: {} arrays of {} rep {}/{} {}", rb::format_count(r.arrays),
                                  rb::format_count(per), rep + 1, cfg.reps, r.container));
        auto f = run_cell(cfg, "many", r.container, "int", per, r.arrays, &r.status);
        if (r.status != "ok") continue;
        if (checksum.empty()) checksum = f["checksum"];
        if (f["checksum"] != checksum) {
          r.status = "error: built other elements than the other contenders";
          continue;
        }
        r.samples.push_back(std::stod(f["seconds"]));
        r.destroy_samples.push_back(std::stod(f["destroy_seconds"]));
        r.rebuild_samples.push_back(std::stod(f["rebuild_seconds"]));
        r.redestroy_samples.push_back(std::stod(f["redestroy_seconds"]));
        r.churn_samples.push_back(std::stod(f["churn_ns"]));
        r.churn2_samples.push_back(std::stod(f["churn2_ns"]));
        r.churn_rss_growth =
            std::max<std::int64_t>(r.churn_rss_growth, std::stoll(f["churn_rss_growth"]));
        r.peak_bytes = std::max<std::uint64_t>(r.peak_bytes, std::stoull(f["peak"]));
      }
    }
    for (Result& r : cells) {
      summarize(r, per * r.arrays);
      r.destroy_seconds = median(r.destroy_samples);
      r.rebuild_seconds = median(r.rebuild_samples);
      r.redestroy_seconds = median(r.redestroy_samples);
      r.churn_ns = median(r.churn_samples);
      r.churn2_ns = median(r.churn2_samples);
      r.peak_bytes = r.peak_bytes > cfg.idle_peak ? r.peak_bytes - cfg.idle_peak : 0;
      r.data_bytes = per * r.arrays * sizeof(int);
      out.push_back(std::move(r));
    }
  }
  progress.done();
}

// "1.23x slower" of r against the vector row's figure, "-" without one, "below resolution" where
// either took less than kTimeResolution.
std::string versus(const Result* base, double base_seconds, double seconds) {
  return base ? timed_ratio(base_seconds, seconds) : "-";
}

void print_many(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "8. Many arrays: {} arrays of ints alive at once, each built by push_back, then all "
      "destroyed\n   (median of {} interleaved reps; peak: the child's, above an idle one). Then, "
      "in the same\n"
      "   child, all built and destroyed again: the second round recycles what the first gave "
      "back.\n   page_floor: each array the start of its own 1 GiB region of one mapping made "
      "beforehand, no\n   call per array: a fresh page and a region's page tables, what no "
      "default array can avoid\n\n",
      rb::format_count(cfg.many_arrays), cfg.reps);
  fmt::print("{:>9}  {:<16}{:>11}  {:>21}  {:>16}  {:>11}  {:>16}  {:>16}  {:>16}  {:>18}\n",
             "per array", "container", "build", "min..max", "vs vector", "destroy",
             "destroy vs vector", "peak", "rebuild vs vector", "redestroy vs vector");
  for (const Result& r : rs) {
    if (r.table != "many") continue;
    if (r.status != "ok") {
      fmt::print("{:>9}  {:<16}{}\n", rb::format_count(r.size), r.container, r.status);
      continue;
    }
    const Result* base = find(rs, "many", "vector", "int", r.size);
    const bool have_base = base && base->status == "ok" && base != &r;
    const Result* b = have_base ? base : nullptr;
    fmt::print("{:>9}  {:<16}{:>11}  {:>21}  {:>16}  {:>11}  {:>16}  {:>16}  {:>16}  {:>18}\n",
               rb::format_count(r.size), r.container, format_seconds(r.seconds),
               format_seconds(r.seconds_min) + ".." + format_seconds(r.seconds_max) +
                   (r.unstable ? " ?" : ""),
               speed_ratio(base, r), format_seconds(r.destroy_seconds),
               versus(b, b ? b->destroy_seconds : 0, r.destroy_seconds),
               peak_cell(r.peak_bytes, r.data_bytes),
               versus(b, b ? b->rebuild_seconds : 0, r.rebuild_seconds),
               versus(b, b ? b->redestroy_seconds : 0, r.redestroy_seconds));
  }
  fmt::print(
      "\n   vs vector: std::vector's time / this time (2.00x faster: half the time); below "
      "resolution:\n   a time under {:g} us (page_floor destroys arrays that own nothing), so no "
      "ratio\n",
      kTimeResolution * 1e6);
  fmt::print(
      "\n   Churn, in the same child: one array at a time created, filled and destroyed, {} "
      "times (twice\n   the arrays above, at least 1,000) on one thread, then as many on each of "
      "two threads at once;\n   ns per array of each thread, and how much the resident set grew "
      "over the one-thread loop\n   (after half as many to warm up)\n\n",
      rb::format_count(std::max<std::uint64_t>(2 * cfg.many_arrays, 1'000)));
  fmt::print("{:>9}  {:<16}{:>11}  {:>16}  {:>11}  {:>16}  {:>12}\n", "per array", "container",
             "1 thread", "vs vector", "2 threads", "vs vector", "RSS growth");
  for (const Result& r : rs) {
    if (r.table != "many" || r.status != "ok") continue;
    const Result* base = find(rs, "many", "vector", "int", r.size);
    const bool have_base = base && base->status == "ok" && base != &r;
    const auto ns = [](double v) { return v > 0 ? fmt::format("{:.0f} ns", v) : std::string("-"); };
    fmt::print("{:>9}  {:<16}{:>11}  {:>16}  {:>11}  {:>16}  {:>12}\n", rb::format_count(r.size),
               r.container, ns(r.churn_ns),
               have_base ? speed_ratio(base->churn_ns, r.churn_ns) : "-", ns(r.churn2_ns),
               have_base && r.churn2_ns > 0 ? speed_ratio(base->churn2_ns, r.churn2_ns) : "-",
               format_bytes(static_cast<std::uint64_t>(r.churn_rss_growth)));
  }
  fmt::print("\n");
}

}  // namespace

const Table kManyArraysTable = {"many", run_many, print_many};

}  // namespace reservoir::bench::tour
