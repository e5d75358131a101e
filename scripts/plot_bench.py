#!/usr/bin/python3
"""Turns reservoir-bench --json output into PNG figures.

    scripts/plot_bench.py RESULTS.json [OUT_DIR]     (default OUT_DIR: the current directory)

Writes OUT_DIR/throughput.png (elements per second vs size), OUT_DIR/memory.png (peak memory vs
size), OUT_DIR/latency.png (the append-latency percentile curve of each container at the
largest measured size) and OUT_DIR/timeline.png (resident and peak memory while one array grows:
std::vector's 2x steps at each reallocation, DynArray following the data). Needs python3-matplotlib (scripts/install-deps.sh plot).
"""
import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError as e:
    sys.exit(f"plot_bench.py needs matplotlib ({e}): install it with scripts/install-deps.sh plot "
             "(Debian's python3-matplotlib)")

COLORS = {"dynarray": "#1b9e77", "vector": "#d95f02", "vector_reserve": "#7570b3", "deque": "#e7298a",
          "vector_populate": "#66a61e", "floor": "#666666"}


def load(path):
    with open(path) as f:
        doc = json.load(f)
    ok = [r for r in doc["results"] if r["status"] == "ok"]
    return doc["context"], ok


def subtitle(ctx):
    """The machine and what one first-touch page fault cost there: it decides most ratios."""
    fault = " / ".join(f'{float(ctx.get(k, 0)) / 1000:.1f}' for k in
                       ("fault_ns_per_page_rw_mmap", "fault_ns_per_page_mprotect",
                        "fault_ns_per_page_populate"))
    return (f'{ctx["os"]} | {ctx["cpu"]} | {ctx["compiler"]} {ctx["build_type"]} | '
            f'THP {ctx.get("transparent_huge_pages", "?")} | load {ctx.get("load_average", "?")}\n'
            f'first touch of a page: {fault} us (rw mmap / mprotect / populated)')


def by(results, table):
    cells = {}
    for r in results:
        if r["table"] == table:
            cells.setdefault(r["type"], {}).setdefault(r["container"], []).append(r)
    for t in cells.values():
        for rows in t.values():
            rows.sort(key=lambda r: r["size"])
    return cells


def per_type_figure(cells, ylabel, value, title, ctx, path, logy=True):
    types = sorted(cells)
    if not types:
        return
    fig, axes = plt.subplots(1, len(types), figsize=(max(8, 5 * len(types)), 4.5), squeeze=False)
    for ax, t in zip(axes[0], types):
        for c, rows in sorted(cells[t].items()):
            ax.plot([r["size"] for r in rows], [value(r) for r in rows], marker="o", label=c,
                    color=COLORS.get(c))
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_title(t)
        ax.set_xlabel("elements")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{title}\n{subtitle(ctx)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_figure(results, ctx, path):
    cells = by(results, "latency")
    types = sorted(cells)
    if not types:
        return
    keys = ["p50", "p90", "p99", "p99_9", "p99_99", "max"]
    fig, axes = plt.subplots(1, len(types), figsize=(max(8, 5 * len(types)), 4.5), squeeze=False)
    for ax, t in zip(axes[0], types):
        size = max(r["size"] for rows in cells[t].values() for r in rows)
        for c, rows in sorted(cells[t].items()):
            row = [r for r in rows if r["size"] == size]
            if row:
                ax.plot(keys, [max(row[0]["latency_ns"][k], 1) for k in keys], marker="o", label=c,
                        color=COLORS.get(c))
        ax.set_yscale("log")
        ax.set_title(f"{t}, {size:.0e} appends")
        ax.set_ylabel("append latency (ns)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Append latency percentiles\n{subtitle(ctx)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_figure(results, ctx, path):
    rows = [r for r in results if r["table"] == "timeline" and r.get("timeline")]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    mib = 1024.0 * 1024.0
    for r in sorted(rows, key=lambda r: r["container"]):
        s = r["timeline"]
        rss0, peak0 = s[0][1], s[0][2]
        xs = [e for e, _, _ in s]
        color = COLORS.get(r["container"])
        ax.plot(xs, [max(p - peak0, 0) / mib for _, _, p in s], color=color, label=f'{r["container"]} peak')
        ax.plot(xs, [max(c - rss0, 0) / mib for _, c, _ in s], color=color, linestyle=":",
                label=f'{r["container"]} resident')
    data = rows[0]["size"]
    ax.plot([0, data], [0, data * 4 / mib], color="black", linewidth=0.8, alpha=0.5, label="data (4 B/int)")
    ax.set_xlabel("elements appended")
    ax.set_ylabel("MiB above the child's start")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"Memory while one array of {data:.0e} ints grows\n{subtitle(ctx)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ctx, results = load(sys.argv[1])
    # Not docs/ by default: the committed figures in docs/results/ are redrawn by
    # scripts/results.py --plots alone, from the committed result files.
    out = sys.argv[2] if len(sys.argv) > 2 else "."
    os.makedirs(out, exist_ok=True)
    # Only the figures this file has data for, so that runs of different tables can each draw
    # theirs into the same directory.
    wrote = []
    if by(results, "throughput"):
        per_type_figure(by(results, "throughput"), "elements per second (median)",
                        lambda r: r["elements_per_second"],
                        "Throughput: build an array of N elements", ctx,
                        os.path.join(out, "throughput.png"))
        wrote.append("throughput.png")
    if by(results, "memory"):
        per_type_figure(by(results, "memory"), "peak RSS above idle (bytes)",
                        lambda r: max(r["peak_bytes"], 1), "Peak memory while building", ctx,
                        os.path.join(out, "memory.png"))
        wrote.append("memory.png")
    if any(r["table"] == "latency" for r in results):
        latency_figure(results, ctx, os.path.join(out, "latency.png"))
        wrote.append("latency.png")
    if timeline_figure(results, ctx, os.path.join(out, "timeline.png")):
        wrote.append("timeline.png")
    print("wrote " + ", ".join(f"{out}/{w}" for w in wrote))
    return 0


if __name__ == "__main__":
    sys.exit(main())
