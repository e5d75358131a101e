#!/usr/bin/env python3
"""Checks that arena/src forms layers: each file includes (and so calls) only files of lower
layers, or its own header, and nothing includes in a circle.

The layers are read from docs/design.md, the table under "### arena/src, layer by layer": one
row a layer, bottom first, each naming its files by stem in backticks (`page_pools` stands for
page_pools.hpp and page_pools.cpp). Every file of arena/src must be in the table. Exit status 0
when all holds, 1 with one line per violation otherwise."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "arena" / "src"
design = (root / "docs" / "design.md").read_text(encoding="utf-8")

section = re.search(r"^### arena/src, layer by layer\n(.*?)(?=^#|\Z)", design, re.M | re.S)
if not section:
    sys.exit("check-layers: docs/design.md has no '### arena/src, layer by layer' table")
layer_of = {}
for row in section.group(1).splitlines():
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if len(cells) < 2 or not cells[0].isdigit():
        continue
    for stem in re.findall(r"`([a-z_]+)`", cells[1]):
        layer_of[stem] = int(cells[0])

problems = []
graph = {}
for path in sorted(src.iterdir()):
    if path.suffix not in (".cpp", ".hpp"):
        continue
    stem = path.stem
    if stem not in layer_of:
        problems.append(f"arena/src/{path.name}: not in docs/design.md's layer table")
        continue
    for inc in re.findall(r'^#include "([^"]+)"', path.read_text(encoding="utf-8"), re.M):
        other = pathlib.PurePath(inc).stem
        if other == stem:
            continue  # a file's own header
        if other not in layer_of:
            problems.append(f"arena/src/{path.name}: includes {inc}, which is in no layer")
            continue
        graph.setdefault(stem, set()).add(other)
        if layer_of[other] >= layer_of[stem]:
            problems.append(
                f"arena/src/{path.name} (layer {layer_of[stem]}) includes {inc} "
                f"(layer {layer_of[other]}): only lower layers may be used")

for stem in layer_of:
    if not (src / f"{stem}.cpp").exists() and not (src / f"{stem}.hpp").exists():
        problems.append(f"docs/design.md names `{stem}`, which arena/src does not hold")

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

# The layers of the whole tree: no file of pal/ includes arena/ or dynarray/, none of arena/
# includes dynarray/.
for folder, above in (("pal", ("arena.hpp", "dynarray.hpp", "arena_resource.hpp")),
                      ("arena", ("dynarray.hpp", "concurrent_dynarray.hpp"))):
    for path in sorted((root / folder).rglob("*.[ch]pp")):
        for inc in re.findall(r"^#include [<\"]([^>\"]+)[>\"]", path.read_text(encoding="utf-8"),
                              re.M):
            if pathlib.PurePath(inc).name in above:
                problems.append(f"{path.relative_to(root)}: includes {inc}, a layer above it")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"check-layers: {len(layer_of)} units of arena/src in "
      f"{len(set(layer_of.values()))} layers, no include reaches up or round")
