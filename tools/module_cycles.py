#!/usr/bin/env python3
"""Import cycles between the crates of this workspace and between the files of each crate.

roll-flow's layering rule (docs/ARCHITECTURE.md): dependencies run one way, and no module
imports one that imports it back, directly or through others. This checks it at two levels:

- crates: the workspace members' `[dependencies]` on each other (cargo refuses a cycle of
  normal dependencies, so this mostly documents the order);
- files: within each crate, every `.rs` file is a module (`a/mod.rs` is `a`, `a/b.rs` is
  `a::b`). File A depends on module B when A names a path that resolves into B: `crate::..`,
  `super::..`, `self::..`, a child module's name, in `use` trees and in code. A path
  resolves to the longest module prefix it names, so naming an item that a parent module
  defines or re-exports is an edge to that parent, and a `pub use child::Item` is an edge
  to the child. `mod child;` declarations are not edges. Test code (`*_tests.rs` files,
  `#[cfg(test)] mod .. { .. }` blocks) is left out.

It also holds the crates to one test layout: a module's unit tests that have a file of
their own sit beside the module's file as `<module>_tests.rs` (for `a/mod.rs`,
`a/a_tests.rs`), declared at the module's end as
`#[cfg(test)] #[path = "<module>_tests.rs"] mod tests;`. A `tests.rs` file or a `tests/`
folder under a crate's `src/` is reported.

Prints every cycle (a strongly connected component of more than one module) and every
test file out of layout, and exits 1 when there is any. Usage: python3
tools/module_cycles.py [WORKSPACE_ROOT]
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or text.startswith("'\\u{", i):
            j = text.find("'", i + 1 if text[i + 1] != "\\" else i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_blocks(text):
    """Removes `#[cfg(test)]` items (`mod x { .. }`, `mod x;`, `use ..;`, `fn`/`impl` blocks)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", text)
        if not m:
            return text
        i = m.end()
        # the item: up to its `;` or its balanced `{ .. }`
        j = i
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j < len(text) and text[j] == "{":
            depth = 0
            while j < len(text):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
        text = text[:m.start()] + text[j + 1:]


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]] (`self` and globs trimmed)."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s, prefix):
        out = []
        depth, start = 0, 0
        parts = []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            brace = p.find("{")
            if brace >= 0:
                head = [x for x in p[:brace].split("::") if x]
                out.extend(parse(p[brace + 1:-1], prefix + head))
            else:
                segs = [x for x in re.sub(r"\bas\w+$", "", p.split(" as ")[0]).split("::") if x]
                segs = [x for x in segs if x not in ("self", "*")]
                if re.search(r"as" + IDENT + "$", p) and "::" in p:
                    segs = [x for x in p.split("::") if x]
                    last = segs[-1]
                    am = re.match(r"(" + IDENT + r")as" + IDENT + "$", last)
                    if am:
                        segs[-1] = am.group(1)
                out.append(prefix + segs)
        return out

    return parse(tree, [])


def crate_sources(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", ".git", "tests", "benches", "examples", "fuzz", "node_modules"))
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath


def is_test_file(rel):
    return os.path.basename(rel).endswith("_tests.rs")


def out_of_layout(src):
    """`tests.rs` files and `tests/` folders under `src`: test files not named `<module>_tests.rs`."""
    found = []
    for dirpath, dirnames, filenames in os.walk(src):
        found.extend(os.path.join(dirpath, d) for d in dirnames if d == "tests")
        found.extend(os.path.join(dirpath, f) for f in filenames if f == "tests.rs")
    return sorted(found)


def module_path(rel):
    segs = rel[:-3].split(os.sep)
    if segs[-1] in ("mod", "lib", "main"):
        segs = segs[:-1]
    return tuple(segs)


def file_graph(src):
    files = {}
    for dirpath, _, filenames in os.walk(src):
        for f in filenames:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(dirpath, f), src)
                if not is_test_file(rel):
                    files[module_path(rel)] = os.path.join(dirpath, f)
    mods = set(files)
    # `#[path = ..]` modules and bins other than main are rare here; a module with no
    # file of its own (inline `mod x { }`) belongs to its file.
    edges = {m: set() for m in mods}
    for m, path in files.items():
        text = strip_test_blocks(strip_comments_and_strings(open(path, encoding="utf-8").read()))
        children = set(re.findall(r"\bmod\s+(" + IDENT + r")\s*;", text))
        paths = []
        for tree in re.findall(r"\buse\s+([^;]+);", text):
            paths.extend(expand_use_tree(tree))
        body = re.sub(r"\buse\s+[^;]+;", "", text)
        for hit in re.finditer(r"(?<![\w:])((?:crate|super|self|" + IDENT + r")(?:::" + IDENT + r")+)(!?)", body):
            p, bang = hit.group(1), hit.group(2)
            if bang and re.fullmatch(r"crate::" + IDENT, p):
                # `$crate::m!` names a `#[macro_export]` macro, which lives at the crate
                # root whichever file defines it: no edge to the root module.
                continue
            paths.append(p.split("::"))
        for segs in paths:
            target = resolve(m, segs, children, mods)
            if target is not None and target != m:
                edges[m].add(target)
    return mods, edges, files


def resolve(m, segs, children, mods):
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        absolute = list(segs[1:])
    elif head == "super":
        base = list(m)
        k = 0
        while k < len(segs) and segs[k] == "super":
            base = base[:-1]
            k += 1
        absolute = base + list(segs[k:])
    elif head == "self":
        absolute = list(m) + list(segs[1:])
    elif head in children:
        absolute = list(m) + list(segs)
    else:
        return None  # another crate, std, or a local name
    for k in range(len(absolute), -1, -1):
        if tuple(absolute[:k]) in mods:
            return tuple(absolute[:k])
    return None


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate_graph(root):
    names, deps = {}, {}
    for d in crate_sources(root):
        text = open(os.path.join(d, "Cargo.toml"), encoding="utf-8").read()
        m = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', text, re.M | re.S)
        if m:
            names[d] = m.group(1)
    for d, name in names.items():
        text = open(os.path.join(d, "Cargo.toml"), encoding="utf-8").read()
        section = re.search(r"^\[dependencies\](.*?)(?=^\[|\Z)", text, re.M | re.S)
        body = section.group(1) if section else ""
        deps[name] = {n for n in names.values() if n != name and re.search(r"^" + re.escape(n) + r"\s*[=.]", body, re.M)}
    return set(names.values()), deps


def show(m):
    return "::".join(m) or "(crate root)"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    cycles = 0
    crates, deps = crate_graph(root)
    for comp in sccs(crates, deps):
        cycles += 1
        print("crate cycle: " + ", ".join(comp))
    modules = 0
    misplaced = 0
    for d in crate_sources(root):
        src = os.path.join(d, "src")
        for path in out_of_layout(src):
            misplaced += 1
            print(f"{os.path.relpath(path, root)}: unit tests go in `<module>_tests.rs` beside the module's file")
        mods, edges, files = file_graph(src)
        modules += len(mods)
        for comp in sccs(mods, edges):
            cycles += 1
            inside = set(comp)
            arrows = sorted(f"{show(a)} -> {show(b)}" for a in comp for b in edges[a] if b in inside)
            print(f"{os.path.relpath(src, root)}: cycle among {', '.join(show(c) for c in comp)}")
            for a in arrows:
                print(f"    {a}")
    print(f"{cycles} cycle(s) over {len(crates)} crates and {modules} modules")
    if misplaced:
        print(f"{misplaced} test file(s) out of layout")
    return 1 if cycles or misplaced else 0


if __name__ == "__main__":
    sys.exit(main())
