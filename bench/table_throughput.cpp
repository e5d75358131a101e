// reservoir-bench table 2: time to construct and fill, interleaved repetitions.
#include "tour.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace reservoir::bench::tour {

namespace {

void run_throughput(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet, cfg.types.size() * cfg.sizes.size() * cfg.containers.size() *
                                    static_cast<std::size_t>(cfg.reps));
  for (rb::Type t : cfg.types) {
    for (std::uint64_t n : cfg.sizes) {
      std::vector<Result> cells;
      for (rb::Container c : cfg.containers) {
        Result r("throughput", rb::name(c), rb::name(t), n);
        if (std::string why = skip_reason(c, t, n, cfg.granule); !why.empty()) r.status = why;
        cells.push_back(std::move(r));
      }
      // Interleaved: every repetition runs every contender once, so drift hits all alike, in an
      // order shuffled per repetition (seeded: the same every run), so that no contender always
      // runs right after the same one (one that frees 2 MiB blocks hands the next warm huge
      // pages, one that frees many pages hands it pages the host has not taken back yet).
      std::vector<std::size_t> order(cells.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      for (int rep = 0; rep < cfg.reps; ++rep) {
        if (rep > 0)
          std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(rep)));
        for (std::size_t i : order) {
          Result& r = cells[i];
          if (r.status != "ok") continue;
          progress.show(fmt::format("throughput: {} {} rep {}/{} {}", r.type, rb::format_count(n),
                                    rep + 1, cfg.reps, r.container));
          auto f = run_cell(cfg, "throughput", r.container, r.type, n,
                            batch_for(n, cfg.batch_elements), &r.status);
          if (r.status != "ok") continue;
          r.samples.push_back(std::stod(f["seconds"]));
          r.huge_page_bytes = std::max<std::uint64_t>(r.huge_page_bytes, std::stoull(f["huge"]));
          if (f.count("calls")) r.kernel_calls = std::stoll(f["calls"]);
        }
      }
      for (Result& r : cells) {
        summarize(r, n);
        out.push_back(std::move(r));
      }
    }
  }
  progress.done();
}

void print_throughput(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "2. Throughput: time to construct and fill (median of {} interleaved reps; min..max)\n\n",
      cfg.reps);
  fmt::print("{:<11}{:>6}  {:<16}{:>11}  {:>21}  {:>10}  {:>16}  {:>16}  {:>7}  {:>9}\n", "type",
             "size", "container", "median", "min..max", "Melem/s", "vs vector", "vs populated",
             "calls", "huge");
  for (auto t : cfg.types) {
    for (auto n : cfg.sizes) {
      const Result* base = find(rs, "throughput", "vector", rb::name(t), n);
      const Result* populated = find(rs, "throughput", "vector_populate", rb::name(t), n);
      for (auto c : cfg.containers) {
        const Result* r = find(rs, "throughput", rb::name(c), rb::name(t), n);
        if (!r) continue;
        if (r->status != "ok") {
          fmt::print("{:<11}{:>6}  {:<16}{}\n", r->type, rb::format_count(n), r->container,
                     r->status);
          continue;
        }
        fmt::print("{:<11}{:>6}  {:<16}{:>11}  {:>21}  {:>10.1f}  {:>16}  {:>16}  {:>7}  {:>9}\n",
                   r->type, rb::format_count(n), r->container, format_seconds(r->seconds),
                   format_seconds(r->seconds_min) + ".." + format_seconds(r->seconds_max) +
                       (r->unstable ? " ?" : ""),
                   r->eps / 1e6, speed_ratio(base, *r), speed_ratio(populated, *r),
                   r->kernel_calls < 0 ? std::string("-") : std::to_string(r->kernel_calls),
                   r->huge_page_bytes ? format_bytes(r->huge_page_bytes) : std::string("-"));
      }
    }
  }
  fmt::print(
      "\n   vs vector: std::vector's time / this time (2.00x faster: half the time); vs "
      "populated: the\n   same against std::vector whose buffers are populated when allocated; "
      "floor: one populated\n   buffer of the final size filled by a loop (floor_huge: in 2 MiB "
      "huge pages). calls: the\n   library's mmap/munmap/mprotect/madvise calls per build "
      "(DynArray; - where not counted);\n   huge: transparent huge pages in use once built "
      "(AnonHugePages). ? = unstable: max/min of\n   the reps > {:g}\n\n",
      kUnstableSpread);
}

}  // namespace

const Table kThroughputTable = {"throughput", run_throughput, print_throughput};

}  // namespace reservoir::bench::tour
