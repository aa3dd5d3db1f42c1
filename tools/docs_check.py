#!/usr/bin/env python3
"""Checks that the map of the code tells the truth.

1. docs/ARCHITECTURE.md's crate table: one row per workspace crate, with its folder (for
   the root package, `src/`).
2. Its crate order (the fenced block that starts `crates, lowest first`): every workspace
   crate on one line, followed by `← ` and exactly the workspace crates its Cargo.toml's
   `[dependencies]` name (by the part after `roll-flow-`), all of them on lines above.
3. Its module order of `roll-flow-operators` (the fenced block that starts
   `operators/src, lowest first`): every top-level module of operators/src on one line,
   and no module using one of a line below its own (module edges as
   tools/module_cycles.py reads them; test files left out).
4. No text file of the repository names a file of this repository that is not there:
   every `*.md` name it mentions, and every path that starts with one of the repository's
   top folders (`docs/`, `bench/`, `tests/`, ...), read from the citing file's folder, its
   crate's folder or the root. Placeholders (`<kind>`, `*`, `{..}`, `TARGET`), files
   .gitignore covers, and the other projects' paths in PEER_PATHS are skipped.

Prints each mismatch and exits 1 when there is any. Usage:
python3 tools/docs_check.py [WORKSPACE_ROOT]
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_cycles  # noqa: E402

TOP_FOLDERS = ("docs", "bench", "tests", "src", "engine", "operators", "kernels", "pipelines",
               "python", "tools", "examples", "fuzz", ".ci")
# Paths that are not this repository's files: other projects' (ROLL's example configs,
# verl's docs, WebShop's tests), and the made-up files of examples and of a test that
# names a missing file on purpose.
PEER_PATHS = {
    "examples/qwen2.5-0.5B-agentic",
    "examples/qwen2.5-0.5B-agentic/agent_val_frozen_lake.yaml",
    "examples/qwen2.5-0.5B-agentic/agentic_val_sokoban.yaml",
    "examples/config/traj_envs.yaml",
    "examples/config/",
    "examples/config/traj_envs_gem_games.yaml",
    "examples/agentic_demo/",
    "examples/qwen2.5-7B-agentic_megatron/",
    "examples/qwen3_agentic_gem/",
    "docs/algo/rollout_corr.md",
    "docs/gguf.md",  # llama.cpp's GGUF specification
    "tests/web-agent-site/engine/test_goal.py",
    "pipelines/bad.ron",
    "pipelines/nope.ron",
}
TEXT_SUFFIXES = (".rs", ".md", ".toml", ".py", ".sh", ".ron", ".yaml", ".yml")


def crate_table(text):
    """{crate: folder} from the table under `## Crates`."""
    section = re.search(r"^## Crates\n(.*?)(?=^## )", text, re.M | re.S)
    if not section:
        return None
    rows = {}
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1].strip("`").rstrip("/")
    return rows


def crate_order(text):
    """[(line index, crate, {deps})] from the block that starts `crates, lowest first`."""
    block = re.search(r"```\ncrates, lowest first[^\n]*\n(.*?)```", text, re.S)
    if not block:
        return None
    out = []
    for k, line in enumerate(block.group(1).strip().splitlines()):
        left, _, right = line.partition("←")
        deps = {d.strip() for d in right.split(",") if d.strip()}
        for name in left.split(","):
            out.append((k, name.strip(), deps))
    return out


def short(name):
    return name[len("roll-flow-"):] if name.startswith("roll-flow-") else name


def cargo_crates(root):
    """{short name: (folder, {workspace deps})} for the root package and every member."""
    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    members = re.search(r"members\s*=\s*\[(.*?)\]", text, re.S).group(1)
    folders = ["."] + re.findall(r'"([^"]+)"', members)
    names = {}
    for folder in folders:
        manifest = open(os.path.join(root, folder, "Cargo.toml"), encoding="utf-8").read()
        names[folder] = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', manifest, re.M | re.S).group(1)
    crates = {}
    for folder, name in names.items():
        manifest = open(os.path.join(root, folder, "Cargo.toml"), encoding="utf-8").read()
        section = re.search(r"^\[dependencies\](.*?)(?=^\[|\Z)", manifest, re.M | re.S)
        body = section.group(1) if section else ""
        deps = {short(n) for n in names.values()
                if n != name and re.search(r"^" + re.escape(n) + r"\s*[=.]", body, re.M)}
        crates[short(name)] = (folder, deps)
    return crates


def check_crates(root, text, errors):
    crates = cargo_crates(root)
    table = crate_table(text)
    if table is None:
        errors.append("docs/ARCHITECTURE.md: no `## Crates` table")
    else:
        table = {short(k): v for k, v in table.items()}
        for name in sorted(set(crates) | set(table)):
            if name not in table:
                errors.append(f"docs/ARCHITECTURE.md: the crate table has no row for `{name}`")
            elif name not in crates:
                errors.append(f"docs/ARCHITECTURE.md: the crate table names `{name}`, which is no workspace crate")
            else:
                folder = crates[name][0]
                said = os.path.normpath(table[name])
                if said not in (os.path.normpath(folder), os.path.normpath(os.path.join(folder, "src"))):
                    errors.append(f"docs/ARCHITECTURE.md: `{name}` is in `{folder}/`, the crate table says `{table[name]}/`")
    order = crate_order(text)
    if order is None:
        errors.append("docs/ARCHITECTURE.md: no crate order block (```\ncrates, lowest first ...)")
        return
    line_of = {name: k for k, name, _ in order}
    for name in sorted(set(crates) - set(line_of)):
        errors.append(f"docs/ARCHITECTURE.md: the crate order lacks `{name}`")
    for k, name, deps in order:
        if name not in crates:
            errors.append(f"docs/ARCHITECTURE.md: the crate order names `{name}`, which is no workspace crate")
            continue
        real = crates[name][1]
        if deps != real:
            errors.append(f"docs/ARCHITECTURE.md: `{name}` depends on {', '.join(sorted(real)) or 'no crate of ours'} "
                          f"(its Cargo.toml); the crate order says {', '.join(sorted(deps)) or 'none'}")
        for dep in real:
            if line_of.get(dep, k) >= k:
                errors.append(f"docs/ARCHITECTURE.md: `{name}` depends on `{dep}`, which is not on a line above it")


def check_module_order(root, text, errors):
    block = re.search(r"```\noperators/src, lowest first[^\n]*\n(.*?)```", text, re.S)
    if not block:
        errors.append("docs/ARCHITECTURE.md: no module order block (```\\noperators/src, lowest first ...)")
        return
    level = {}
    for k, line in enumerate(block.group(1).strip().splitlines()):
        for name in re.findall(module_cycles.IDENT, line.split("  ")[0]):
            level[name] = k
    mods, edges, _ = module_cycles.file_graph(os.path.join(root, "operators", "src"))
    top = {m[0] for m in mods if m}
    for name in sorted(top - set(level)):
        errors.append(f"docs/ARCHITECTURE.md: module `{name}` of operators/src is missing from the module order")
    for name in sorted(set(level) - top):
        errors.append(f"docs/ARCHITECTURE.md: the module order names `{name}`, which operators/src lacks")
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            if a and b and a[0] != b[0] and a[0] in level and b[0] in level and level[b[0]] > level[a[0]]:
                errors.append(
                    f"docs/ARCHITECTURE.md: `{'::'.join(a)}` uses `{'::'.join(b)}`, "
                    f"but `{b[0]}` is listed below `{a[0]}`")


def tracked_files(root):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.split()


def ignored(root, paths):
    """The paths .gitignore covers (build outputs, run folders): naming them is fine."""
    if not paths:
        return set()
    out = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=root, input="\n".join(paths),
                         capture_output=True, text=True)
    return set(out.stdout.split())


def crate_root(rel, manifests):
    """The folder of the nearest Cargo.toml above `rel` ('' for the workspace root)."""
    d = os.path.dirname(rel)
    while d and os.path.join(d, "Cargo.toml") not in manifests:
        d = os.path.dirname(d)
    return d


def check_references(root, errors):
    files = tracked_files(root)
    existing = set(files)
    for f in files:
        d = os.path.dirname(f)
        while d and d not in existing:
            existing.add(d)
            d = os.path.dirname(d)
    manifests = {f for f in files if os.path.basename(f) == "Cargo.toml"}
    basenames = {os.path.basename(f) for f in files}
    # A token: a path-like run of characters; placeholders (`*`, `<..>`, `{..}`, `TARGET`)
    # are kept in it so such tokens can be skipped whole.
    token_re = re.compile(r"(?<![\w./<>{}*-])([\w.<>{}*/-]*[\w*>}/])")
    top_re = re.compile(r"^(?:" + "|".join(re.escape(t) for t in TOP_FOLDERS) + r")/")
    found = []
    for rel in files:
        if not (rel.endswith(TEXT_SUFFIXES) or rel in (".ci/run", "test.sh")):
            continue
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        bases = [os.path.dirname(rel), crate_root(rel, manifests), ""]
        for lineno, line in enumerate(text.splitlines(), 1):
            for token in token_re.findall(line):
                token = token.rstrip(".")
                is_path = top_re.match(token) is not None
                is_md = token.endswith(".md")
                if not (is_path or is_md) or token in PEER_PATHS or re.fullmatch(r"\.\w+", token):
                    continue
                if re.search(r"[*<>{}]", token) or any(re.fullmatch(r"[A-Z]+", seg) for seg in token.split("/")):
                    continue  # a placeholder: `<kind>.rs`, `*.ron`, `fuzz/corpus/TARGET`
                if "/" not in token and token in basenames:
                    continue
                if any(os.path.normpath(os.path.join(b, token)) in existing for b in bases):
                    continue
                found.append((rel, lineno, token))
    outputs = ignored(root, sorted({t for _, _, t in found}))
    for rel, lineno, token in found:
        if token not in outputs and token.rstrip("/") not in outputs:
            errors.append(f"{rel}:{lineno}: names `{token}`, which the repository lacks")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    errors = []
    text = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    check_crates(root, text, errors)
    check_module_order(root, text, errors)
    check_references(root, errors)
    for e in errors:
        print(e)
    print(f"{len(errors)} mismatch(es) between the docs and the repository")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
