#!/usr/bin/env python3
"""Fails when the top-level modules of server/src import each other in a cycle.

An edge A -> B is any `crate::B` path in a file of module A (`a2a/service.rs` is in `a2a`);
lib.rs and main.rs only declare and start, so they are left out, and so is test code (a
`tests.rs`, or a file's trailing `mod tests`), which may build the whole server. Prints each
cycle found.
"""
import pathlib, re, sys

src = pathlib.Path(__file__).resolve().parent.parent / "server" / "src"
edges = {}
for path in src.rglob("*.rs"):
    module = path.relative_to(src).parts[0].removesuffix(".rs")
    if module in ("lib", "main") or path.name == "tests.rs":
        continue
    text = path.read_text().split("#[cfg(test)]\nmod tests {")[0]
    used = set(re.findall(r"\bcrate::(\w+)", text))
    for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
        used |= set(re.findall(r"(?:^|,)\s*(\w+)", group))
    edges.setdefault(module, set()).update(used - {module, "self", "super"})

cycles = []
def visit(node, stack):
    for nxt in sorted(edges.get(node, ())):
        if nxt in stack:
            cycle = stack[stack.index(nxt):] + [nxt]
            if min(cycle[:-1]) == cycle[0]:
                cycles.append(" -> ".join(cycle))
        elif nxt in edges:
            visit(nxt, stack + [nxt])
for start in sorted(edges):
    visit(start, [start])
for c in sorted(set(cycles)):
    print("module cycle:", c)
sys.exit(1 if cycles else 0)
