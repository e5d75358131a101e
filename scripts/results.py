#!/usr/bin/python3
"""Writes the README's results section and docs/results.md from the bench's JSON in docs/results/.

    scripts/results.py [--check] [--plots]

Reads the bench's JSON files in docs/results/ (each made by the command beside it in SOURCES):
  quick-tour.json   ./scripts/bench.sh --json docs/results/quick-tour.json   (the quick tour)
  tables-6-8.json   reservoir-bench --only timeline,mixed,many --json docs/results/tables-6-8.json
                    (the tour's last tables without its time budget: on a loaded machine the
                    quick tour spends its 70 s before reaching them)
and writes
  - the lines between `<!-- results:begin` and `<!-- results:end -->` in README.md: the headline
    figures, beside the machine, the command and the first-touch fault cost of their run;
  - docs/results.md, whole: every table of every file, each beside its machine and command.
So every figure in either is one of a committed result file. --check changes nothing and fails if
README.md or docs/results.md is not what the JSON gives (the CTest `readme_results`). --plots also
redraws docs/results/*.png with scripts/plot_bench.py (needs matplotlib: scripts/install-deps.sh
plot). Python 3 standard library only otherwise.
"""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Each result file and the command that wrote it.
SOURCES = {
    "docs/results/quick-tour.json": "./scripts/bench.sh --json docs/results/quick-tour.json",
    "docs/results/tables-6-8.json": "build/release/bench/reservoir-bench --only timeline,mixed,many "
                                    "--json docs/results/tables-6-8.json",
}
RESULTS_PAGE = "docs/results.md"
BEGIN = "<!-- results:begin"
END = "<!-- results:end -->"


def cells(doc, table):
    return [r for r in doc["results"] if r["table"] == table]


def run_of(docs, table):
    """The first file with an ok cell of this table, or None."""
    for d in docs:
        if any(r["status"] == "ok" for r in cells(d, table)):
            return d
    return None


def machine(c):
    return (f"{c['cpu']}, {c['os']}, {c['compiler']} {c['build_type']}, THP "
            f"`{c['transparent_huge_pages']}`, hypervisor {c['hypervisor']}, load "
            f"{c.get('load_average', 'n/a')} at the start")


def fault(c):
    return (f"first touch {us(c['fault_ns_per_page_rw_mmap'])} per page in a read-write mapping, "
            f"{us(c['fault_ns_per_page_mprotect'])} after `mprotect`, "
            f"{us(c['fault_ns_per_page_populate'])} populated")


def find(doc, table, container, size, type_="int"):
    for r in cells(doc, table):
        if r["container"] == container and r["size"] == size and r["type"] == type_:
            return r if r["status"] == "ok" else None
    return None


def us(ns):
    return f"{float(ns) / 1000:.1f} us"


def duration(s):
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def ratio(base, mine, key="seconds"):
    """'2.73x faster' / '1.20x slower' (with ' ?' if either cell is unstable), '-' if missing."""
    if not base or not mine or not base.get(key) or not mine.get(key):
        return "-"
    x = base[key] / mine[key]
    text = f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"
    if base.get("unstable") or mine.get("unstable"):
        text += " ?"
    return f"**{text}**" if x >= 1 else text


def count(n):
    """1000 -> '1e3', 2500000 -> '2.5e6', as the bench prints sizes."""
    mantissa, exponent = f"{n:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def mib(b):
    return f"{b / 1048576:.1f} MiB" if b >= 1048576 else f"{b / 1024:.0f} KiB"


def generate(docs):
    doc = docs[0]
    c = doc["context"]
    out = []
    out.append(f"The quick tour (`{SOURCES[doc['_source']]}`) on {machine(c)}; **{fault(c)}** "
               "(read-write: what `std::vector` gets from `malloc`); where a first touch costs "
               "less, DynArray's lead shrinks. Every table of the run: "
               "[docs/results.md](docs/results.md). Medians "
               f"of {c['reps']} interleaved repetitions, ratios within one run; `?`: the slowest "
               f"repetition took over {c['unstable_spread']}x the fastest. Populated vector: "
               "`std::vector` whose buffers are populated when allocated; floor: one populated "
               "buffer of the final size filled by a loop.")
    out.append("")
    out.append("| `int` elements | DynArray build | vs `std::vector` | vs exact `reserve` | "
               "vs `std::deque` | vs populated vector | vs floor | peak: DynArray / vector |")
    out.append("|---|---|---|---|---|---|---|---|")
    sizes = sorted({r["size"] for r in cells(doc, "throughput") if r["type"] == "int"})
    for n in sizes:
        d = find(doc, "throughput", "dynarray", n)
        if not d:
            continue
        md, mv = find(doc, "memory", "dynarray", n), find(doc, "memory", "vector", n)
        peak = f"{mib(md['peak_bytes'])} / {mib(mv['peak_bytes'])}" if md and mv else "-"
        out.append(f"| {count(n)} | {duration(d['seconds'])}{' ?' if d['unstable'] else ''} | "
                   f"{ratio(find(doc, 'throughput', 'vector', n), d)} | "
                   f"{ratio(find(doc, 'throughput', 'vector_reserve', n), d)} | "
                   f"{ratio(find(doc, 'throughput', 'deque', n), d)} | "
                   f"{ratio(find(doc, 'throughput', 'vector_populate', n), d)} | "
                   f"{ratio(find(doc, 'throughput', 'floor', n), d)} | {peak} |")
    out.append("")
    lat = [r for r in cells(doc, "latency") if r["status"] == "ok" and r["type"] == "int"]
    if lat:
        n = max(r["size"] for r in lat)
        d, v = find(doc, "latency", "dynarray", n), find(doc, "latency", "vector", n)
        if d and v:
            f = find(doc, "latency", "floor", n)
            floor = f"; the floor's {duration(f['latency_ns']['max'] / 1e9)}" if f else ""
            out.append(f"- **Latency** of one append at {count(n)} ints: p99.99 "
                       f"{duration(d['latency_ns']['p99_99'] / 1e9)} for DynArray, "
                       f"{duration(v['latency_ns']['p99_99'] / 1e9)} for `std::vector`; the "
                       f"worst {duration(d['latency_ns']['max'] / 1e9)} and "
                       f"{duration(v['latency_ns']['max'] / 1e9)} (`std::vector` copying the "
                       f"array){floor} (on a busy machine, a preempted append).")
    later = run_of(docs, "many") or run_of(docs, "mixed")
    apart = ""
    if later is not None and later is not doc:
        lc = later["context"]
        apart = (f" (run apart, `{SOURCES[later['_source']]}`, the tour's budget being spent "
                 f"before; load "
                 f"{lc.get('load_average', 'n/a')}, **first touch "
                 f"{us(lc['fault_ns_per_page_rw_mmap'])} / {us(lc['fault_ns_per_page_mprotect'])} "
                 f"/ {us(lc['fault_ns_per_page_populate'])}**)")
    many_doc = run_of(docs, "many") or doc
    many = [r for r in cells(many_doc, "many") if r["status"] == "ok"]
    if many:
        parts = []
        for n in sorted({r["size"] for r in many}):
            d, v = find(many_doc, "many", "dynarray", n), find(many_doc, "many", "vector", n)
            if d and v:
                parts.append(f"{n} ints each: build {ratio(v, d)}, destroy "
                             f"{ratio(v, d, 'destroy_seconds')}")
        if parts:
            out.append(f"- **Many small arrays** ({count(many[0]['arrays'])} alive at once){apart}, "
                       f"DynArray against `std::vector`: {'; '.join(parts)}.")
    mixed_doc = run_of(docs, "mixed") or doc
    mixed = [r for r in cells(mixed_doc, "mixed") if r["status"] == "ok"]
    if mixed:
        parts = []
        for t in ["int", "string", "array10", "heap", "all"]:
            its = sorted({r["size"] for r in mixed if r["type"] == t})
            for i in its:
                d = find(mixed_doc, "mixed", "dynarray", i, t)
                v = find(mixed_doc, "mixed", "vector", i, t)
                if d and v:
                    parts.append(f"{t} {ratio(v, d)}")
        if parts:
            where = "same run" if apart and many else apart.strip(" ()")
            out.append(f"- **Mixed workload** (arrays of arrays created, copied, grown and "
                       f"destroyed, {mixed[0]['size']} iterations{'; ' + where if where else ''}), "
                       f"DynArray's total against `std::vector`'s: {', '.join(parts)}.")
    conc = [r for r in cells(doc, "concurrent") if r["status"] == "ok"]
    if conc:
        parts = []
        for t in sorted({r["threads"] for r in conc}):
            w = next((r for r in conc if r["container"] == "concurrent_dynarray_writer"
                      and r["threads"] == t), None)
            m = next((r for r in conc if r["container"] == "vector_mutex" and r["threads"] == t),
                     None)
            if w and m:
                parts.append(f"{t} thread{'s' if t > 1 else ''} {duration(w['seconds'])} vs "
                             f"{duration(m['seconds'])} ({ratio(m, w)})")
        if parts:
            out.append(f"- **Concurrent appends** of {count(conc[0]['size'])} ints, "
                       "`ConcurrentDynArray` with a `Writer` per thread against `std::vector` + "
                       f"mutex: {'; '.join(parts)}.")
    out.append("")
    out.append("![throughput](docs/results/throughput.png) "
               "![peak memory while one array grows](docs/results/timeline.png)")
    return out


CONTAINERS = ["dynarray", "vector", "vector_reserve", "vector_populate", "deque", "floor",
              "floor_huge", "concurrent_dynarray", "concurrent_dynarray_writer",
              "concurrent_dynarray_bulk", "concurrent_dynarray_readers", "vector_mutex",
              "deque_mutex", "tbb_concurrent_vector", "vector_shared_mutex"]


def ordered(names):
    return sorted(names, key=lambda n: (CONTAINERS.index(n) if n in CONTAINERS else 99, n))


def pivot(doc, table, row_key, cell, type_=None, note="", label=None):
    """A Markdown table of one bench table: a row per row_key value, a column per container."""
    rows = [r for r in cells(doc, table) if type_ is None or r["type"] == type_]
    if not rows:
        return []
    names = ordered({r["container"] for r in rows})
    out = [f"| {label or row_key} | " + " | ".join(f"`{n}`" for n in names) + " |",
           "|---|" + "---|" * len(names)]
    for key in sorted({r[row_key] for r in rows}):
        line = []
        for n in names:
            r = next((r for r in rows if r["container"] == n and r[row_key] == key), None)
            if r is None:
                line.append("")
            elif r["status"] != "ok":
                line.append(r["status"])
            else:
                line.append(cell(r))
        name = count(key) if row_key == "size" and key >= 1000 else f"`{key}`" \
            if isinstance(key, str) else str(key)
        out.append(f"| {name} | " + " | ".join(line) + " |")
    if note:
        out += ["", note]
    return out + [""]


def time_cell(r, key="seconds"):
    return duration(r[key]) + (" ?" if r.get("unstable") else "")


def results_page(docs):
    """docs/results.md: every table of every result file, beside its machine and command."""
    out = ["# Results", "",
           "<!-- generated by scripts/results.py from docs/results/*.json; do not edit -->",
           "Every figure on this page is read from a committed result file in "
           "[results/](results), made by the command shown with it; `scripts/results.py` writes "
           "this page and the README's results section from them (the CTest `readme_results` "
           "checks that both match). To measure on your machine, run the command and then "
           "`scripts/results.py --plots`. What each table measures: [bench.md](bench.md). Times "
           "are medians of the repetitions, interleaved; `?`: the slowest repetition took over "
           "1.5x the fastest. Ratios compare cells of one run only.", ""]
    for doc in docs:
        c = doc["context"]
        out += [f"## `{doc['_source'].split('/')[-1]}`", "",
                f"Command: `{SOURCES[doc['_source']]}`. Machine: {machine(c)}; {fault(c)}; "
                f"huge pages in effect: {c.get('huge_pages_in_effect', 'n/a')}; "
                f"{c['reps']} repetitions.", ""]
        for t in ["int", "unique_ptr", "string"]:
            block = pivot(doc, "throughput", "size", time_cell, t)
            if block:
                out += [f"**Build time** (`push_back` of n `{t}`s into a new container):", ""] + block
        block = pivot(doc, "memory", "size", lambda r: mib(r["peak_bytes"]), "int")
        if block:
            out += ["**Peak memory** while building n ints (above an idle child's):", ""] + block
        block = pivot(doc, "latency", "size",
                      lambda r: f"{duration(r['latency_ns']['p99_99'] / 1e9)} / "
                                f"{duration(r['latency_ns']['max'] / 1e9)}", "int")
        if block:
            out += ["**Latency of one append**, p99.99 / worst:", ""] + block
        block = pivot(doc, "concurrent", "threads", time_cell)
        if block:
            n = count(cells(doc, "concurrent")[0]["size"])
            out += [f"**Concurrent appends** of {n} ints in total, by thread count:", ""] + block
        block = pivot(doc, "collatz", "threads", time_cell)
        if block:
            n = count(cells(doc, "collatz")[0]["size"])
            out += [f"**The Collatz memo** ({n} numbers), by thread count:", ""] + block
        block = pivot(doc, "many", "size",
                      lambda r: f"{time_cell(r)} / {duration(r['destroy_seconds'])} / "
                                f"{mib(r['peak_bytes'])}", label="ints each")
        if block:
            arrays = count(cells(doc, "many")[0]["arrays"])
            out += [f"**Many arrays alive at once** ({arrays} arrays of n ints): build / "
                    "destroy / peak memory:", ""] + block
        block = pivot(doc, "mixed", "type", time_cell, label="element type")
        if block:
            its = cells(doc, "mixed")[0].get("iterations", cells(doc, "mixed")[0]["size"])
            out += [f"**Mixed workload** (arrays of arrays created, copied, grown and destroyed, "
                    f"{its} iterations), total time:", ""] + block
    out += ["## Figures", "",
            "Drawn by `scripts/results.py --plots` (`scripts/plot_bench.py`) from the files above.",
            "", "![build time by size](results/throughput.png)",
            "![peak memory by size](results/memory.png)",
            "![append latency percentiles](results/latency.png)",
            "![resident and peak memory while one array grows](results/timeline.png)", ""]
    return out


def wrap(lines):
    """Paragraphs and list items at 100 columns, as the rest of the README; tables as they are."""
    out = []
    for line in lines:
        if line.startswith("|") or line.startswith("!") or len(line) <= 100:
            out.append(line)
        else:
            indent = "  " if line.startswith("- ") else ""
            out.extend(textwrap.wrap(line, 100, subsequent_indent=indent,
                                     break_long_words=False, break_on_hyphens=False))
    return out


def main():
    args = sys.argv[1:]
    if any(a not in ("--check", "--plots") for a in args):
        print(__doc__, file=sys.stderr)
        return 2
    docs = []
    for source in SOURCES:
        path = os.path.join(ROOT, source)
        if os.path.exists(path):
            with open(path) as f:
                docs.append(json.load(f))
                docs[-1]["_source"] = source
    if not docs:
        print(f"results.py: none of {', '.join(SOURCES)} exists", file=sys.stderr)
        return 1
    readme_path = os.path.join(ROOT, "README.md")
    with open(readme_path) as f:
        lines = f.read().split("\n")
    try:
        begin = next(i for i, l in enumerate(lines) if l.startswith(BEGIN))
        end = next(i for i, l in enumerate(lines) if l.startswith(END))
    except StopIteration:
        print(f"results.py: README.md has no '{BEGIN} ...' / '{END}' lines", file=sys.stderr)
        return 1
    new = lines[:begin + 1] + wrap(generate(docs)) + lines[end:]
    page_path = os.path.join(ROOT, RESULTS_PAGE)
    page = "\n".join(wrap(results_page(docs)))
    old_page = open(page_path).read() if os.path.exists(page_path) else ""
    if "--check" in args:
        stale = [n for n, same in (("README.md", new == lines), (RESULTS_PAGE, page == old_page))
                 if not same]
        if stale:
            print(f"results.py: {' and '.join(stale)} differ from what docs/results/ gives; run "
                  "scripts/results.py", file=sys.stderr)
            return 1
        print(f"results.py: README.md's results and {RESULTS_PAGE} are those of docs/results/")
        return 0
    if new != lines:
        with open(readme_path, "w") as f:
            f.write("\n".join(new))
    if page != old_page:
        with open(page_path, "w") as f:
            f.write(page)
    if "--plots" in args:
        # Each file draws the figures of its own tables, titled with its own machine context.
        for source in SOURCES:
            if os.path.exists(os.path.join(ROOT, source)):
                subprocess.run([os.path.join(ROOT, "scripts/plot_bench.py"),
                                os.path.join(ROOT, source), os.path.join(ROOT, "docs/results")],
                               check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
