// reservoir-bench table 9 (opt-in: --only bulk): DynArray's bulk operations on n ints against
// memset / memcpy of the same bytes, cold (fresh memory: a new array against a fresh populated
// mapping) and warm (memory already committed and touched: the array after clear(), against a
// buffer that is already faulted in). Warm isolates the element loop: memory bandwidth is its
// floor.
#include "tour.hpp"

#include <chrono>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace reservoir::bench::tour {

namespace {

// The operations and the floor each is measured against.
struct BulkOp {
  const char* name;
  const char* floor;  // memset or memcpy
};
constexpr BulkOp kBulkOps[] = {{"resize", "memset"}, {"resize_value", "memset"},
                               {"assign", "memcpy"}, {"append_range", "memcpy"},
                               {"insert", "memcpy"}, {"memset", "memset"},
                               {"memcpy", "memcpy"}};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One timed operation on `a`, which is empty (fresh or cleared).
void apply(std::string_view op, DynArray<int>& a, const std::vector<int>& source, std::size_t n) {
  if (op == "resize") {
    a.resize(n);
  } else if (op == "resize_value") {
    a.resize(n, 7);
  } else if (op == "assign") {
    a.assign(source.begin(), source.end());
  } else if (op == "append_range") {
    a.append_range(source);
  } else if (op == "insert") {
    a.insert(a.end(), source.begin(), source.end());
  } else {
    throw std::invalid_argument("unknown bulk operation");
  }
}

}  // namespace

std::string bulk_child(std::string_view op, std::uint64_t count) {
  const auto n = static_cast<std::size_t>(count);
  std::vector<int> source(n);
  std::iota(source.begin(), source.end(), 0);
  double cold = 0, warm = 0;
  int check = 0;
  if (op == "memset" || op == "memcpy") {
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(int), 1);
    auto t0 = Clock::now();
    void* p = rb::populated_map(bytes);
    if (op == "memset") {
      std::memset(p, 0, n * sizeof(int));
    } else {
      std::memcpy(p, source.data(), n * sizeof(int));
    }
    cold = since(t0);
    t0 = Clock::now();
    if (op == "memset") {
      std::memset(p, 0, n * sizeof(int));
    } else {
      std::memcpy(p, source.data(), n * sizeof(int));
    }
    warm = since(t0);
    check = n ? static_cast<volatile int*>(p)[n - 1] : 0;
    rb::populated_unmap(p, bytes);
  } else {
    auto t0 = Clock::now();
    DynArray<int> a;
    apply(op, a, source, n);
    cold = since(t0);
    if (a.size() != n) throw std::logic_error("bulk: wrong size");
    a.clear();  // keeps the committed, touched memory
    t0 = Clock::now();
    apply(op, a, source, n);
    warm = since(t0);
    if (a.size() != n) throw std::logic_error("bulk: wrong size");
    check = n ? a.back() : 0;
  }
  rb::g_sink = rb::g_sink + static_cast<std::uint64_t>(check);
  return fmt::format("ok seconds={:.9g} warm={:.9g}", cold, warm);
}

namespace {

void run_bulk(const Config& cfg, std::vector<Result>& out) {
  Progress progress(!cfg.quiet,
                    cfg.sizes.size() * std::size(kBulkOps) * static_cast<std::size_t>(cfg.reps));
  for (std::uint64_t n : cfg.sizes) {
    std::vector<Result> cells;
    for (const BulkOp& op : kBulkOps) {
      Result r("bulk", op.name, "int", n);
      r.status = skip_reason(rb::Container::vector_reserve, rb::Type::int_, 3 * n, cfg.granule);
      if (r.status.empty()) r.status = "ok";
      cells.push_back(std::move(r));
    }
    run_reps(cfg, cells, [&](Result& r, int rep) {
      progress.show(fmt::format("bulk: {} ints rep {}/{} {}", rb::format_count(n), rep + 1,
                                cfg.reps, r.container));
      auto f = run_cell(cfg, "bulk", r.container, "int", n, 1, &r.status);
      if (r.status != "ok") return;
      r.samples.push_back(std::stod(f["seconds"]));
      r.warm_samples.push_back(std::stod(f["warm"]));
    });
    for (Result& r : cells) {
      summarize(r, n);
      r.warm_seconds = median(r.warm_samples);
      out.push_back(std::move(r));
    }
  }
  progress.done();
}

std::string times_floor(const Result* floor, double floor_seconds, double seconds) {
  if (!floor || floor->status != "ok" || floor_seconds <= 0) return "-";
  return fmt::format("{:.2f}x", seconds / floor_seconds);
}

void print_bulk(const Config& cfg, const std::vector<Result>& rs) {
  fmt::print(
      "9. Bulk operations on n ints (median of {} reps): cold = a new array / a fresh populated\n"
      "   mapping; warm = the array after clear() / memory already faulted in. x floor: time "
      "over\n   memset or memcpy of the same bytes (1.00x = memory bandwidth)\n\n",
      cfg.reps);
  fmt::print("{:>6}  {:<14}{:>11}  {:>9}  {:>11}  {:>9}\n", "size", "operation", "cold", "x floor",
             "warm", "x floor");
  for (const Result& r : rs) {
    if (r.table != "bulk") continue;
    if (r.status != "ok") {
      fmt::print("{:>6}  {:<14}{}\n", rb::format_count(r.size), r.container, r.status);
      continue;
    }
    const std::string floor_name = bulk_floor(r.container);
    const Result* floor = find(rs, "bulk", floor_name, "int", r.size);
    const bool is_floor = r.container == floor_name;
    fmt::print(
        "{:>6}  {:<14}{:>11}  {:>9}  {:>11}  {:>9}\n", rb::format_count(r.size), r.container,
        format_seconds(r.seconds),
        is_floor ? "-" : times_floor(floor, floor ? floor->seconds : 0, r.seconds),
        format_seconds(r.warm_seconds),
        is_floor ? "-" : times_floor(floor, floor ? floor->warm_seconds : 0, r.warm_seconds));
  }
  fmt::print("\n");
}

}  // namespace

const Table kBulkTable = {"bulk", run_bulk, print_bulk};

std::vector<std::string> bulk_operation_names() {
  std::vector<std::string> names;
  for (const BulkOp& op : kBulkOps)
    names.emplace_back(op.name);
  return names;
}

std::string bulk_floor(std::string_view op) {
  for (const BulkOp& b : kBulkOps) {
    if (op == b.name) return b.floor;
  }
  return "";
}

}  // namespace reservoir::bench::tour
