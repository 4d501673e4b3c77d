"""The house: the package's folders are its architecture, and imports point one way.

Read from the source (every import statement, the ones inside functions included), not
from what happens to be loaded, so a lazy import cannot hide a cycle or an upward edge.
"""

from __future__ import annotations

import ast
import os

import pytest

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lib")
PACKAGE = os.path.join(LIB, "eggshell")

# Each layer and what it may import. "base" is the top-level settings and plumbing modules.
BASE = {"errors", "paths", "log"}
ALLOWED = {
    "base": {"base"},
    "core": {"base", "core"},
    "config": {"base", "core", "config"},
    "graph": {"base", "core", "config", "graph"},
    "search": {"base", "core", "config", "graph", "search"},
    "reuse": {"base", "core", "config", "graph", "search", "reuse"},
    "runtime": {"base", "core", "config", "graph", "search", "reuse", "runtime"},
    "hosts": {"base", "core", "config", "hosts"},  # payloads and replies only: no memory, no I/O of ours
    "stages": {"base", "core", "config", "graph", "search", "reuse", "runtime", "hosts", "stages"},
    "cli": {"base", "core", "config", "graph", "search", "reuse", "runtime", "hosts", "stages", "cli"},
    "main": {"base", "core", "config", "graph", "search", "reuse", "runtime", "hosts", "stages", "cli", "main"},
}
FOLDERS = {"core", "graph", "search", "reuse", "stages", "hosts", "runtime", "cli"}


def modules(root: str = PACKAGE) -> dict[str, tuple[str, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    base = os.path.dirname(root)
    for d, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                parts = os.path.relpath(os.path.join(d, f), base)[:-3].split(os.sep)
                pkg = parts[-1] == "__init__"
                out[".".join(parts[:-1] if pkg else parts)] = (os.path.join(d, f), pkg)
    return out


def imports(mods: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Each module's imports of other eggshell modules, function-level ones included."""
    edges = {}
    for name, (path, is_pkg) in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        out = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                out |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (n.level - 1)]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                for a in n.names:
                    sub = target + "." + a.name
                    out.add(sub if sub in mods else target)
        edges[name] = {t for t in out if t in mods and t != name}
    return edges


def layer(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return "base"  # the package's __init__: its docstring and __version__, no imports
    if parts[1] == "__main__":
        return "main"  # `python -m eggshell PROG`
    if len(parts) == 2 and parts[1] not in FOLDERS:
        return "base" if parts[1] in BASE else "config" if parts[1] == "config" else "?" + parts[1]
    return parts[1]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        work = [(v, iter(sorted(edges[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


MODS = modules()
EDGES = imports(MODS)


def test_every_module_sits_in_a_known_layer():
    unknown = sorted(m for m in MODS if layer(m) not in ALLOWED)
    assert not unknown, "modules outside the layout (docs/architecture.md): %s" % unknown
    assert {layer(m) for m in MODS} >= FOLDERS


def test_no_import_cycles():
    assert cycles(EDGES) == []


def test_imports_point_one_way():
    upward = sorted("%s -> %s" % (a, b) for a, bs in EDGES.items() for b in bs if layer(b) not in ALLOWED[layer(a)])
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_the_package_init_imports_nothing():
    with open(MODS["eggshell"][0], encoding="utf-8") as f:
        assert not [n for n in ast.walk(ast.parse(f.read())) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_subpackage_inits_are_empty():
    """An `import eggshell.search.rank` must not pay for its neighbours (the hook's start-up)."""
    full = [m for m, (path, pkg) in MODS.items() if pkg and m != "eggshell" and os.path.getsize(path)]
    assert full == []


def test_the_checker_sees_what_it_must():
    """The checks above can fail: a cycle, an upward and a function-level edge are all found."""
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": set()}
    assert cycles(edges) == [["a.x", "a.y", "a.z"]]
    assert "eggshell.graph.store" in EDGES["eggshell.graph.save"]
    lazy = [b for b in EDGES["eggshell.stages.hook"] if b.startswith("eggshell.runtime")]
    assert lazy, "the hook's imports (some inside functions) are seen"
    assert layer("eggshell.runtime.manager") == "runtime" and "stages" not in ALLOWED["runtime"]


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_each_folder_has_modules(folder):
    assert [m for m in MODS if layer(m) == folder and not MODS[m][1]], folder


def test_paths_computed_from_a_modules_place_name_the_package_and_its_lib():
    """Moving a module into a folder must not move what it computes from its own file: a spawned
    manager imports the checkout's lib/ (never lib/eggshell, which would shadow top-level modules
    such as config or log), and a reinstall is noticed in every folder."""
    from eggshell.runtime import client

    assert client.lib_dir() == LIB
    count, newest = client.source_stamp()
    files = [path for path, _ in MODS.values()]
    assert count == len(files) and newest == max(os.stat(p).st_mtime_ns for p in files)


def test_a_spawned_manager_imports_this_checkout(tmp_path):
    import signal
    import time

    from helpers import pids_by_data_root, proc_text, wait_for
    from eggshell.runtime import client

    data = str(tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EGGSHELL_")}
    env.update(EGGSHELL_DATA_ROOT=data, EGGSHELL_MANAGER_IDLE="5")
    assert client.spawn(data, env)
    try:
        pids = wait_for(lambda: [p for p in pids_by_data_root(data) if b"egg-manager" in proc_text(p, "cmdline")], 20)
        assert pids
        environ = dict(x.split(b"=", 1) for x in proc_text(pids[0], "environ").split(b"\0") if b"=" in x)
        assert environ[b"PYTHONPATH"].decode().split(os.pathsep)[0] == LIB
    finally:
        for p in pids_by_data_root(data):
            os.kill(p, signal.SIGTERM)
        wait_for(lambda: not pids_by_data_root(data), 10)
        time.sleep(0.1)


def test_a_starting_manager_tries_its_lock_before_it_loads_memory():
    """Racing hooks may start two managers; the loser must find the lock held and exit at once,
    so egg-manager's module loads no store, search or reuse code before `serve` takes the lock."""
    import subprocess
    import sys

    code = "import sys, eggshell.runtime.manager; print(' '.join(sorted(m for m in sys.modules if m.startswith('eggshell'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=LIB),
                            check=True).stdout.split()
    heavy = [m for m in loaded if m.split(".")[1:2] in (["graph"], ["search"], ["reuse"]) or m == "eggshell.runtime.warm"]
    assert "eggshell.runtime.manager" in loaded and heavy == []
