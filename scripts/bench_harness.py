#!/usr/bin/env python3
"""Holds reservoir-bench's throughput cells against the fresh-process harness (bench/harness/).

    scripts/bench_harness.py [--build build/release] [--sizes 1e6,1e7,1e8] [--runs 5]

For each size: the harness's programs (floor, vector_reserve, dynarray, dynarray_populate, vector),
one process per run, nothing warmed, RUNS runs in alternating order, medians; then
reservoir-bench's own throughput cells for floor, vector_reserve and dynarray at that size (--reps
RUNS, medians). Prints the machine's first-touch fault cost, the harness's ratios (DynArray, with
the default population, left to faults, and with every step populated ahead, against the floor
and against vector + exact reserve) and, per contender, bench median / harness median: the bench
agrees with the harness where that is within 10%. A report, not a test: timings on a loaded machine say little
(the load average is printed). Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# dynarray_populate: DynArray with every step populated ahead (prefault on), the other policy
HARNESS = ["floor", "vector_reserve", "dynarray", "dynarray_populate", "vector"]
BENCH = ["floor", "vector_reserve", "dynarray"]  # the bench cells held against the harness


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release", help="the build directory (release)")
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="element counts (ints)")
    ap.add_argument("--runs", type=int, default=5, help="runs per contender and size")
    args = ap.parse_args()
    if args.runs < 1:
        sys.exit("bench_harness.py: --runs must be at least 1")
    harness_dir = os.path.join(args.build, "bench", "harness")
    bench = os.path.join(args.build, "bench", "reservoir-bench")
    for path in [bench] + [os.path.join(harness_dir, "harness_" + c) for c in HARNESS + ["fault"]]:
        if not os.access(path, os.X_OK):
            sys.exit(f"bench_harness.py: {path} is missing: build the targets reservoir-bench and "
                     "reservoir-harness-* first (cmake --build --preset release)")
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    fault = fields(run([os.path.join(harness_dir, "harness_fault")]))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"first-touch fault: {fault.get('fault_ns_per_page', '?')} ns per "
          f"{fault.get('page_size', '?')}-byte page; load average {load:.2f} on "
          f"{os.cpu_count()} CPUs")
    print(f"harness: one process per run, {args.runs} alternating runs, medians; bench: "
          f"reservoir-bench --only throughput --reps {args.runs}, medians\n")
    print(f"{'size':>6}  {'contender':<15}{'harness':>12}{'bench':>12}{'bench/harness':>15}"
          f"{'faults':>10}")
    worst = 0.0
    compared = 0
    for n in sizes:
        times = {c: [] for c in HARNESS}
        faults = {c: [] for c in HARNESS}
        for r in range(args.runs):
            order = HARNESS[r % len(HARNESS):] + HARNESS[:r % len(HARNESS)]
            for c in order:
                f = fields(run([os.path.join(harness_dir, "harness_" + c), str(n)]))
                times[c].append(float(f["seconds"]))
                faults[c].append(int(f["minor_faults"]))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bench.json")
            subprocess.run([bench, "--only", "throughput", "--containers", ",".join(BENCH),
                            "--types", "int", "--sizes", str(n), "--reps", str(args.runs),
                            "--threads", "0", "--quiet", "--json", out], check=True)
            with open(out) as f:
                cells = {r["container"]: r for r in json.load(f)["results"]
                         if r["table"] == "throughput" and r["status"] == "ok"}
        med = {c: statistics.median(times[c]) for c in HARNESS}
        for c in HARNESS:
            b = cells.get(c)
            ratio = b["seconds"] / med[c] if b else None
            if ratio:
                worst = max(worst, abs(ratio - 1))
                compared += 1
            bench_text = f"{b['seconds'] * 1e3:.2f}ms" if b else "-"
            ratio_text = f"{ratio:.2f}x" if ratio else "-"
            print(f"{n:>6.0e}  {c:<15}{med[c] * 1e3:>10.2f}ms{bench_text:>12}{ratio_text:>15}"
                  f"{statistics.median(faults[c]):>10.0f}")
        for d, name in (("dynarray", "DynArray"), ("dynarray_populate", "DynArray, populated")):
            print(f"{'':>6}  harness: {name} {med[d] / med['floor']:.2f}x the floor, "
                  f"{med[d] / med['vector_reserve']:.2f}x vector + exact reserve, "
                  f"{med[d] / med['vector']:.2f}x std::vector (time ratios)")
        print()
    if compared == 0:
        sys.exit("bench_harness.py: error: the bench produced no cell to compare with the harness")
    print(f"largest bench/harness disagreement: {worst * 100:.0f}% "
          f"({'within' if worst <= 0.10 else 'NOT within'} 10%)")


if __name__ == "__main__":
    main()
