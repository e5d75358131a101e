#!/usr/bin/env python3
"""Holds reservoir-bench's throughput cells against the fresh-process harness (bench/harness/).

    scripts/bench_harness.py [--build build/release] [--sizes 1e6,1e7,1e8] [--runs 5]
                             [--types int,string,unique_ptr]

For each size: the harness's programs (floor, vector_reserve, dynarray, dynarray_faults, vector),
one process per run, nothing warmed, RUNS runs in alternating order, medians; then
reservoir-bench's own throughput cells for floor, vector_reserve and dynarray at that size (--reps
RUNS, medians). Prints the machine's first-touch fault cost, the harness's ratios (DynArray, with
the default population (on Linux every bounded step populated ahead) and with population left to
faults (prefault off), against the floor
and against vector + exact reserve) and, per contender, bench median / harness median: the bench
agrees with the harness where that is within 10%. With --types string or unique_ptr, also std::vector
against DynArray of 15-character strings or std::unique_ptr<int> (programs harness_*_string,
harness_*_unique_ptr), each beside the bench's cells of that type. A report, not a test: timings on a loaded machine say little
(the load average is printed). Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# dynarray_faults: DynArray with population left to faults (prefault off), the other policy
HARNESS = ["floor", "vector_reserve", "dynarray", "dynarray_faults", "vector"]
BENCH = ["floor", "vector_reserve", "dynarray"]  # the bench cells held against the harness


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


# Other element types (--types): std::vector against DynArray, each type's programs named
# harness_<contender>_<type>; the bench's cells of the same type are held against them.
TYPED = ["vector", "dynarray"]


def measure(harness_dir, bench, n, elem, runs):
    """The harness's medians for size n and element type elem, and the bench's cells beside."""
    programs = HARNESS if elem == "int" else [c + "_" + elem for c in TYPED]
    names = HARNESS if elem == "int" else TYPED
    times = {c: [] for c in names}
    faults = {c: [] for c in names}
    for r in range(runs):
        k = r % len(names)
        for c, prog in list(zip(names, programs))[k:] + list(zip(names, programs))[:k]:
            f = fields(run([os.path.join(harness_dir, "harness_" + prog), str(n)]))
            times[c].append(float(f["seconds"]))
            faults[c].append(int(f["minor_faults"]))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        subprocess.run([bench, "--only", "throughput", "--containers",
                        ",".join(BENCH if elem == "int" else TYPED), "--types", elem,
                        "--sizes", str(n), "--reps", str(runs), "--threads", "0", "--quiet",
                        "--json", out], check=True)
        with open(out) as f:
            cells = {r["container"]: r for r in json.load(f)["results"]
                     if r["table"] == "throughput" and r["status"] == "ok"}
    med = {c: statistics.median(times[c]) for c in names}
    return names, med, {c: statistics.median(faults[c]) for c in names}, cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release", help="the build directory (release)")
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="element counts")
    ap.add_argument("--runs", type=int, default=5, help="runs per contender and size")
    ap.add_argument("--types", default="int",
                    help="element types: int, string, unique_ptr (other than int: std::vector "
                         "against DynArray only)")
    args = ap.parse_args()
    if args.runs < 1:
        sys.exit("bench_harness.py: --runs must be at least 1")
    types = args.types.split(",")
    for t in types:
        if t not in ("int", "string", "unique_ptr"):
            sys.exit(f"bench_harness.py: error: unknown type {t!r} (int, string, unique_ptr)")
    harness_dir = os.path.join(args.build, "bench", "harness")
    bench = os.path.join(args.build, "bench", "reservoir-bench")
    needed = HARNESS + ["fault"] + [c + "_" + t for t in types if t != "int" for c in TYPED]
    for path in [bench] + [os.path.join(harness_dir, "harness_" + c) for c in needed]:
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
    print(f"{'type':<11}{'size':>6}  {'contender':<18}{'harness':>12}{'bench':>12}"
          f"{'bench/harness':>15}{'faults':>10}")
    worst = 0.0
    compared = 0
    for elem in types:
        for n in sizes:
            names, med, faults, cells = measure(harness_dir, bench, n, elem, args.runs)
            for c in names:
                b = cells.get(c)
                ratio = b["seconds"] / med[c] if b else None
                if ratio:
                    worst = max(worst, abs(ratio - 1))
                    compared += 1
                bench_text = f"{b['seconds'] * 1e3:.2f}ms" if b else "-"
                ratio_text = f"{ratio:.2f}x" if ratio else "-"
                print(f"{elem:<11}{n:>6.0e}  {c:<18}{med[c] * 1e3:>10.2f}ms{bench_text:>12}"
                      f"{ratio_text:>15}{faults[c]:>10.0f}")
            if elem == "int":
                for d, name in (("dynarray", "DynArray"), ("dynarray_faults", "DynArray, left to faults")):
                    print(f"{'':>17}  harness: {name} {med[d] / med['floor']:.2f}x the floor, "
                          f"{med[d] / med['vector_reserve']:.2f}x vector + exact reserve, "
                          f"{med[d] / med['vector']:.2f}x std::vector (time ratios)")
            else:
                print(f"{'':>17}  harness: DynArray {med['dynarray'] / med['vector']:.2f}x "
                      f"std::vector's time")
            print()
    if compared == 0:
        sys.exit("bench_harness.py: error: the bench produced no cell to compare with the harness")
    print(f"largest bench/harness disagreement: {worst * 100:.0f}% "
          f"({'within' if worst <= 0.10 else 'NOT within'} 10%)")


if __name__ == "__main__":
    main()
