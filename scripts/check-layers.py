#!/usr/bin/env python3
"""Checks that arena/src, pal and dynarray each form layers: each file includes (and so calls)
only files of lower layers, or its own header, and nothing includes in a circle; and that no
module includes one above it (pal below arena below dynarray).

The layers of each module are read from docs/design.md, one table a module, under its heading:
"### arena/src, layer by layer" (arena/src), "### pal/src, layer by layer" (pal/src, pal/include,
pal/testing) and "### dynarray, layer by layer" (dynarray/include/reservoir, its detail/, and
dynarray/src). A table has one row a layer, bottom first, each naming its files by stem in
backticks (`page_pools` stands for page_pools.hpp and page_pools.cpp, wherever in the module's
folders they are). Every .cpp and .hpp file of a module's folders must be in its table.

Adding a file: add its stem to the row of the layer it belongs to (the lowest layer above every
file it includes), or add a row: `| 3 | `new_stem` | what it owns |`, renumbering the rows above
it. A file missing from the table, or a stem the table names that no file has, is a violation.

Includes counted: "quoted" ones by the stem of the name (as arena/src's files include each
other), and <reservoir/...> ones that name a file under the module's own include folder; other
<...> includes (the standard library, other modules) are not layers of the module.

Exit status 0 when all holds, 1 with one line per violation otherwise."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
design = (root / "docs" / "design.md").read_text(encoding="utf-8")

# (the name in messages, the heading of its table, its folders, its <...> include folders)
MODULES = (
    ("arena/src", "arena/src", ("arena/src",), ()),
    ("pal", "pal/src", ("pal/src", "pal/include/reservoir", "pal/testing"), ("pal/include",)),
    ("dynarray", "dynarray",
     ("dynarray/include/reservoir", "dynarray/include/reservoir/detail", "dynarray/src"),
     ("dynarray/include",)),
)

problems = []
summaries = []


def includes(path):
    """(name, quoted) for each #include of `path`."""
    text = path.read_text(encoding="utf-8")
    return [(m.group(2), m.group(1) == '"')
            for m in re.finditer(r'^#include ([<"])([^>"]+)[>"]', text, re.M)]


def check_module(label, heading, folders, include_roots):
    section = re.search(rf"^### {re.escape(heading)}, layer by layer\n(.*?)(?=^#|\Z)", design,
                        re.M | re.S)
    if not section:
        sys.exit(f"check-layers: docs/design.md has no '### {heading}, layer by layer' table")
    layer_of = {}
    for row in section.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for stem in re.findall(r"`([a-z_]+)`", cells[1]):
            layer_of[stem] = int(cells[0])

    files = []
    for folder in folders:
        d = root / folder
        if d.is_dir():
            files += [p for p in sorted(d.iterdir()) if p.is_file() and p.suffix in (".cpp", ".hpp")]
    module_files = {p.resolve() for p in files}

    graph = {}
    for path in files:
        stem = path.stem
        name = path.relative_to(root).as_posix()
        if stem not in layer_of:
            problems.append(f"{name}: not in docs/design.md's layer table")
            continue
        for inc, quoted in includes(path):
            if not quoted:
                # <reservoir/...>: a layer of this module only if it names one of its files.
                if not any((root / r / inc).resolve() in module_files for r in include_roots):
                    continue
            other = pathlib.PurePath(inc).stem
            if other == stem:
                continue  # a file's own header
            if other not in layer_of:
                problems.append(f"{name}: includes {inc}, which is in no layer")
                continue
            graph.setdefault(stem, set()).add(other)
            if layer_of[other] >= layer_of[stem]:
                problems.append(
                    f"{name} (layer {layer_of[stem]}) includes {inc} "
                    f"(layer {layer_of[other]}): only lower layers may be used")

    stems = {p.stem for p in files}
    for stem in layer_of:
        if stem not in stems:
            problems.append(f"docs/design.md names `{stem}`, which {label} does not hold")

    # No circle, whatever the table says (a circle inside one layer is caught above too).
    state = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                problems.append("include circle: " + " -> ".join(trail + [node, nxt]))
            elif nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    summaries.append(f"{len(layer_of)} units of {label} in {len(set(layer_of.values()))} layers")


for module in MODULES:
    check_module(*module)

# The layers of the whole tree, bottom first: no file of pal/ includes a file of arena/ or
# dynarray/, none of arena/ includes one of dynarray/. An include counts as the file it names
# (quoted: beside the including file; <...>: under a module's include folder), or, where it names
# none, by the name of a public header of a module above.
TREE = ("pal", "arena", "dynarray")
files_of = {m: {p.resolve() for p in (root / m).rglob("*.[ch]pp")} for m in TREE}
public_names = {m: {p.name for p in (root / m / "include").rglob("*.hpp")} for m in TREE}
include_roots = [root / m / "include" for m in TREE]
for i, folder in enumerate(TREE):
    above = TREE[i + 1:]
    for path in sorted((root / folder).rglob("*.[ch]pp")):
        for inc, quoted in includes(path):
            named = [(path.parent / inc).resolve()] if quoted else []
            named += [(r / inc).resolve() for r in include_roots]
            named = [p for p in named if p.exists()]
            if named:
                upward = any(p in files_of[m] for p in named for m in above)
            else:
                upward = any(pathlib.PurePath(inc).name in public_names[m] for m in above)
            if upward:
                problems.append(f"{path.relative_to(root)}: includes {inc}, a layer above it")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"check-layers: {'; '.join(summaries)}; no include reaches up or round")
