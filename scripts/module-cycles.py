#!/usr/bin/env python3
"""Fails when modules import each other in a cycle, at any level of any crate.

The crates read are server/src, app/src and app/wire/src. At every level of the module tree
the children of one module (its files and its directories) are the nodes, and an edge A -> B
is a path in A that names something in sibling B: `crate::x::y`, `super::y`, `self::y`, in a
`use` tree or inline. So `a2a -> store -> a2a` is a cycle between top-level modules, and
`a202/keys.rs -> a202/object.rs -> a202/keys.rs` one between files of a module. A parent's
own file (`mod.rs`, `lib.rs`) is the module's face, not a node: children may use it.

Test code is left out (a `tests.rs`, or a file's trailing `#[cfg(test)] mod tests`), since it
may build the whole program. Prints each cycle found.
"""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATES = ["server/src", "app/src", "app/wire/src"]


def module_path(src, path):
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return parts


def use_trees(text):
    """Every path a `use` statement brings in, its braces expanded."""
    for stmt in re.findall(r"\buse\s+([^;]*);", text):
        yield from expand(re.sub(r"\s+", "", stmt))


def expand(tree):
    if "{" not in tree:
        yield tree.split(" as ")[0]
        return
    head, rest = tree.split("{", 1)
    body, depth, items, cur = rest[:-1], 0, [], ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    for item in filter(None, items):
        yield from expand(head + item)


def absolute(here, path):
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    base = list(here)
    while segs and segs[0] in ("super", "self"):
        if segs.pop(0) == "super":
            if not base:
                return None
            base.pop()
    return base + segs if path.startswith(("super", "self")) else None


def edges_of(crate):
    src = ROOT / crate
    files = {tuple(module_path(src, p)): p for p in src.rglob("*.rs")}
    modules = set(files) | {m[:i] for m in files for i in range(len(m))}
    edges = {}
    for here, path in files.items():
        if path.name == "tests.rs":
            continue
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", path.read_text())[0]
        refs = list(use_trees(text))
        refs += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)
        for ref in refs:
            target = absolute(here, ref)
            if target is None:
                continue
            lcp = 0
            while lcp < min(len(here), len(target)) and here[lcp] == target[lcp]:
                lcp += 1
            if lcp >= len(here) or lcp >= len(target):
                continue
            if tuple(target[: lcp + 1]) not in modules:
                continue
            parent = "::".join([crate] + list(here[:lcp]))
            edges.setdefault(parent, {}).setdefault(here[lcp], set()).add(target[lcp])
    return edges


def cycles_in(graph):
    found = set()

    def visit(node, stack):
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cycle = stack[stack.index(nxt):] + [nxt]
                if min(cycle[:-1]) == cycle[0]:
                    found.add(" -> ".join(cycle))
            else:
                visit(nxt, stack + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    return sorted(found)


failed = False
for crate in CRATES:
    for parent, graph in sorted(edges_of(crate).items()):
        for cycle in cycles_in(graph):
            print(f"cycle in {parent}: {cycle}")
            failed = True
sys.exit(1 if failed else 0)
