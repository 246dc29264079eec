"""The architecture holds (docs/architecture.md): no import loops among the project's modules,
the parts import only downwards, isosim never imports llm_runs, and ``import isosim`` stays light.

Every import statement counts: module level, inside functions and under ``if TYPE_CHECKING`` (a
loop that only type checkers see is still a loop a reader must untangle). An import of
``a.b.c`` counts as an edge to ``a.b.c`` only, not to the packages ``a`` and ``a.b`` that Python
also initialises (package ``__init__`` files of the parts hold only a docstring, so they
import nothing back).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("isosim", "llm_runs")

# The parts, lowest first: a module may import its own part and any part listed before it
# (docs/architecture.md draws the same order). Top-level modules of a package are named by
# their full module name; "isosim.*" catches what no other entry names.
LAYERS = [
    ["isosim.errors", "isosim.files", "isosim.records"],
    ["isosim.sim"],
    ["isosim.sweeps"],
    ["isosim.frontier"],
    ["isosim.validation.readings"],
    ["isosim.integrations", "isosim.predict"],
    ["isosim.validation"],
    ["isosim"],
    ["llm_runs.config", "llm_runs.cards", "llm_runs.problems"],
    ["llm_runs.sampling"],
    ["llm_runs.training", "llm_runs.__main__"],
    ["llm_runs.launch"],
    ["llm_runs.organism"],
    ["llm_runs"],
    ["cli"],
]
HEAVY = ("transformers", "vllm", "accelerate")


def module_files() -> dict[str, Path]:
    """Every module of the project by dotted name (packages by their ``__init__``), plus cli."""
    mods = {"cli": ROOT / "cli.py"}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The project module an imported name lands in (the longest known prefix), or None."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def import_edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (all import statements, anywhere in the file)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule pkg.sub when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                hit = resolve(t, mods)
                if hit and hit != mod:
                    edges[mod].add(hit)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer_of(mod: str) -> int:
    best, best_len = None, -1
    for i, names in enumerate(LAYERS):
        for name in names:
            if (mod == name or mod.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    assert best is not None, f"{mod} is in no part of LAYERS: place it (and in docs/architecture.md)"
    return best


@pytest.fixture(scope="module")
def edges():
    return import_edges(module_files())


def test_the_scan_sees_imports(edges):
    """The scan finds the imports it must (a scan that saw nothing would pass every check)."""
    assert "isosim.sim.engine.batch" in edges["isosim.sim.engine"]
    assert "isosim.sim.config" in edges["isosim"]
    assert "isosim.sweeps.sweep" in edges["cli"]  # ``from isosim.sweeps import sweep``
    assert "llm_runs.training.train" in edges["llm_runs.launch.calibrate"]  # a function-level import
    assert len(edges) > 60


def test_detector_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_loops(edges):
    found = cycles(edges)
    assert not found, "import loops (break them by moving the shared names below both users):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_parts_import_only_downwards(edges):
    bad = [f"{a} -> {b}" for a, targets in edges.items() for b in sorted(targets) if layer_of(b) > layer_of(a)]
    assert not bad, "imports against the layering of docs/architecture.md:\n" + "\n".join(bad)


def test_isosim_never_imports_llm_runs(edges):
    bad = [f"{a} -> {b}" for a, targets in edges.items() if a == "isosim" or a.startswith("isosim.")
           for b in targets if b.startswith("llm_runs")]
    assert not bad, "\n".join(bad)


def test_import_isosim_is_light():
    code = ("import sys, isosim, isosim.sweeps.sweep, isosim.frontier.analysis, isosim.predict.recommend; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]", res.stdout


def test_top_levels_stay_small():
    for pkg in PACKAGES:
        top = sorted(p.name for p in (ROOT / pkg).glob("*.py"))
        assert len(top) <= 10, f"{pkg}/ has {len(top)} top-level modules (at most 10; put the rest in a part): {top}"


def test_install_names_every_package_and_no_global_cli():
    """pyproject's explicit package list (explicit because cli.py is installed as
    ``_isosim_cli/cli.py``) names every package folder, and nothing installs a module ``cli``."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tool = conf["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")}
    assert set(tool["packages"]) == on_disk | {"_isosim_cli"}
    assert "py-modules" not in tool
    assert tool["package-dir"] == {"_isosim_cli": "."}
    assert conf["project"]["scripts"]["isosim"] == "_isosim_cli.cli:main"
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["cli.py"], "only cli.py would land in _isosim_cli"
