// reservoir-bench tables 4 and 5: concurrent appends, and the Collatz memo of Rojc & Depolli.
#include "collatz.hpp"
#include "tour.hpp"

#include <string_view>

namespace reservoir::bench::tour {

namespace {

// Table 4 (concurrent appends) and table 5 (the Collatz memo of Rojc & Depolli).
void run_concurrent(const Config& cfg, const char* table, std::vector<Result>& out) {
  const bool collatz_table = std::string_view(table) == "collatz";
  // The memo workload is heavier per element (and the baseline serialises): a quarter the size.
  const std::uint64_t n = collatz_table ? std::max<std::uint64_t>(concurrent_size(cfg) / 4, 1000)
                                        : concurrent_size(cfg);
  static const std::vector<std::string> kCollatz = {
      "concurrent_dynarray", "concurrent_dynarray_writer", "concurrent_dynarray_blocks",
      "vector_shared_mutex"};
  const std::vector<std::string> containers =
      collatz_table ? kCollatz
                    : std::vector<std::string>(std::begin(rb::kConcurrentContainers),
                                               std::end(rb::kConcurrentContainers));
  Progress progress(!cfg.quiet,
                    cfg.threads.size() * containers.size() * static_cast<std::size_t>(cfg.reps));
  for (std::uint64_t threads : cfg.threads) {
    std::vector<Result> cells;
    for (const std::string& c : containers) {
      Result r(table, c, "int", n);
      r.threads = threads;
      r.status = skip_reason(rb::Container::vector, rb::Type::int_, n, cfg.granule);
      if (r.status.empty()) r.status = "ok";
      cells.push_back(std::move(r));
    }
    run_reps(cfg, cells, [&](Result& r, int rep) {
      progress.show(fmt::format("{}: {} threads rep {}/{} {}", table, threads, rep + 1, cfg.reps,
                                r.container));
      auto f = run_cell(cfg, table, r.container, "int", n, threads, &r.status);
      if (r.status == "ok") r.samples.push_back(std::stod(f["seconds"]));
    });
    for (Result& r : cells) {
      summarize(r, n);
      out.push_back(std::move(r));
    }
  }
  progress.done();
}

void print_concurrent(const Config& cfg, const char* table, const std::vector<Result>& rs) {
  const bool collatz_table = std::string_view(table) == "collatz";
  const char* base_name = collatz_table ? "vector_shared_mutex" : "vector_mutex";
  if (collatz_table) {
    fmt::print(
        "5. Collatz memo (Rojc & Depolli): orbit lengths of 1..{} in one growing array shared "
        "by T threads\n   (median of {} reps; concurrent_dynarray: emplace_back_with per "
        "number; _writer: a Writer per\n   thread, blocks of {} numbers flushed in order; "
        "_blocks: append_with, blocks of {} claimed first;\n   the memo reads past the prefix "
        "with try_get; vs 1 thread: the 1-thread time over this one,\n   >1x is faster)\n\n",
        rb::format_count(std::max<std::uint64_t>(concurrent_size(cfg) / 4, 1000)), cfg.reps,
        collatz::kBlock, collatz::kBlock);
  } else {
    fmt::print(
        "4. Concurrent appends: T threads append {} ints in total (median of {} reps; _writer: "
        "a Writer\n   per thread; _bulk: append_range batches of {}; _readers: one more thread "
        "scans the published\n   prefix meanwhile; claim_floor: one compare-and-swap per "
        "element and a store into a populated\n   buffer, nothing else: what any per-element "
        "claim costs at least)\n\n",
        rb::format_count(concurrent_size(cfg)), cfg.reps, rb::kBulkBatch);
  }
  fmt::print("{:>8}  {:<28}{:>11}  {:>21}  {:>10}  {:>20}  {:>22}\n", "threads", "container",
             "median", "min..max", "Melem/s", fmt::format("vs {}", base_name),
             "throughput vs 1 thread");
  for (const Result& r : rs) {
    if (r.table != table) continue;
    if (r.status != "ok") {
      fmt::print("{:>8}  {:<28}{}\n", r.threads, r.container, r.status);
      continue;
    }
    const Result* base = nullptr;
    const Result* single = nullptr;
    for (const Result& o : rs) {
      if (o.table != table || o.status != "ok") continue;
      if (o.container == base_name && o.threads == r.threads) base = &o;
      if (o.container == r.container && o.threads == 1) single = &o;
    }
    fmt::print("{:>8}  {:<28}{:>11}  {:>21}  {:>10.1f}  {:>20}  {:>22}\n", r.threads, r.container,
               format_seconds(r.seconds),
               format_seconds(r.seconds_min) + ".." + format_seconds(r.seconds_max), r.eps / 1e6,
               speed_ratio(base, r),
               single ? fmt::format("{:.2f}x", single->seconds / r.seconds) : std::string("-"));
  }
  fmt::print(
      "\n   throughput vs 1 thread: elements per second over the same container's on 1 thread "
      "(the same\n   total; 2.00x: twice as many per second, half the time)\n\n");
}

}  // namespace

// The concurrent table's size: the largest requested size, at most 1e6 (it runs 3 contenders x
// every thread count x reps, and contention shows at any size).
std::uint64_t concurrent_size(const Config& cfg) {
  return std::min<std::uint64_t>(*std::max_element(cfg.sizes.begin(), cfg.sizes.end()), 1'000'000);
}

const Table kConcurrentTable = {"concurrent",
                                [](const Config& cfg, std::vector<Result>& out) {
                                  if (!cfg.threads.empty()) run_concurrent(cfg, "concurrent", out);
                                },
                                [](const Config& cfg, const std::vector<Result>& rs) {
                                  if (!cfg.threads.empty()) print_concurrent(cfg, "concurrent", rs);
                                }};
const Table kCollatzTable = {"collatz",
                             [](const Config& cfg, std::vector<Result>& out) {
                               if (!cfg.threads.empty()) run_concurrent(cfg, "collatz", out);
                             },
                             [](const Config& cfg, const std::vector<Result>& rs) {
                               if (!cfg.threads.empty()) print_concurrent(cfg, "collatz", rs);
                             }};

}  // namespace reservoir::bench::tour
