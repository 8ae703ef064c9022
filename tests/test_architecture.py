"""The import direction of STYLE.md §2, checked on the source: lower layers never import higher ones."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mbsim"

# layer of each top-level part of the package; a module may import only its own layer or lower
LAYER = {
    "errors": 0,
    "names": 0,
    "interrupts": 0,
    "scene": 1,
    "models": 1,
    "model": 2,
    "diagnostics": 3,
    "output": 3,
    "solvers": 3,
    "simulate": 4,
    "compare": 4,
    "assertions": 4,
    "sweep": 4,
    "verify": 4,
    "docs": 5,
    "cli": 6,
    "__main__": 7,
    "__init__": 0,
}
# modules that must not import anything from mbsim
PURE = {
    "model/spatial.py",
    "solvers/lcp.py",
    "solvers/optimize.py",
    "solvers/soa_kernels.py",
    "model/contact/obb.py",
    "model/contact/octree.py",
    "model/contact/sdf.py",
}


PROBLEMS = PACKAGE / "verify" / "problems"  # data: the derivations of the references, standalone scripts


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if PROBLEMS not in p.parents)


def _compiled_modules():
    """The Cython sources of the compiled core (.pyx implementations, .pxd declarations)."""
    return sorted([*PACKAGE.rglob("*.pyx"), *PACKAGE.rglob("*.pxd")])


# `from X cimport ...`, `from X import ...`, `cimport X`, `import X` at the start of a Cython line
_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))", re.MULTILINE)


def _cython_imports(path: Path) -> list[str]:
    return [a or b for a, b in _CYTHON_IMPORT.findall(path.read_text(encoding="utf-8"))]


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_import_direction(path):
    part = _part(path)
    for name in _imports(path):
        if name == "mbsim" or not name.startswith("mbsim."):
            continue
        target = name.split(".")[1]
        # a pure module may import its own compiled kernels (sdf -> sdf_kernels), nothing else
        own_kernels = "mbsim." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts) + "_kernels"
        if str(path.relative_to(PACKAGE)) in PURE and name != own_kernels:
            pytest.fail(f"{path.name} must not import from mbsim, imports {name}")
        assert LAYER[target] <= LAYER[part] or target == part, f"{part} must not import {name}"
        if part in ("diagnostics", "output"):
            assert target in ("model", "errors", "names", "output", "diagnostics", "scene"), f"{part} imports {name}"


@pytest.mark.parametrize("path", _compiled_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_import_direction_of_the_compiled_core(path):
    part = _part(path)
    for name in _cython_imports(path):
        if name.startswith("mbsim."):
            target = name.split(".")[1]
            assert LAYER[target] <= LAYER[part] or target == part, f"{path.name} must not import {name}"


def test_no_jit_anywhere():
    """Issue 29: the kernels are compiled by pip install; numba is neither a dependency nor imported."""
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any(d.lower().startswith("numba") for d in project["dependencies"]), project["dependencies"]
    users = [
        str(p.relative_to(PACKAGE))
        for p in [*_modules(), *_compiled_modules()]
        if any(
            n == "numba" or n.startswith("numba.") for n in (_imports(p) if p.suffix == ".py" else _cython_imports(p))
        )
    ]
    assert users == [], f"numba imported by {users}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_cli_imports_click_and_exits(path):
    if _part(path) == "cli":
        return
    assert not any(n == "click" or n.startswith("click.") for n in _imports(path)), f"{path} imports click"
    assert "sys.exit" not in path.read_text(encoding="utf-8"), f"{path} calls sys.exit"


# the run loop and the methods ask each other only what the Solver protocol declares
PROTOCOL_USERS = [
    "simulate.py",
    "compare.py",
    *(f"solvers/{p.name}" for p in sorted((PACKAGE / "solvers").glob("*.py"))),
]
# hasattr/getattr on objects that are not mbsim's: (module, the probed name): scipy's integrator
# objects (their internals), scipy.integrate itself (an integrator by name) and a YAML parser's exception
FOREIGN_ATTRIBUTE_CHECKS = {
    ("solvers/integrators.py", "solver"),
    ("solvers/integrators.py", "scipy.integrate"),
    ("compare.py", "exc"),
}


@pytest.mark.parametrize("rel", PROTOCOL_USERS)
def test_no_method_is_probed_with_hasattr(rel):
    tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
    probes = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
        and (rel, ast.unparse(node.args[0])) not in FOREIGN_ATTRIBUTE_CHECKS
    ]
    assert probes == [], f"{rel} finds attributes by probing instead of the Solver protocol: {probes}"


def test_every_method_implements_the_whole_solver_protocol():
    from mbsim.solvers import SOLVERS
    from mbsim.solvers.base import Solver, SolverBase

    declared = [n for n in Solver.__annotations__ if n not in ("model", "data")]  # (instance attributes)
    declared += [n for n, v in vars(Solver).items() if callable(v) and not n.startswith("_")]
    assert {"integrator_label", "block_stepping", "adaptive", "extra_diagnostics", "body_coordinates"} <= set(declared)
    for name, module in SOLVERS.items():
        assert issubclass(module.Solver, SolverBase), f"{name}.Solver does not derive from SolverBase"
        for attribute in declared:
            assert hasattr(module.Solver, attribute), f"{name}.Solver lacks {attribute}"


def test_one_file_per_joint_type_holds_all_of_that_type() -> None:
    """Issue 13: a joint type is one complete object in its own module of mbsim/model/joints --
    its keys, constraint equations, coordinate, and the motion and coordinates the recursive
    method needs -- and no other module names a joint type (recursive reads the registry; the
    kernels know motions, which joint types name)."""
    from mbsim.model.joints import JOINT_TYPES
    from mbsim.model.joints.base import JointType

    complete = ("primitives", "tree_motion", "tree_coordinates")
    assert set(complete) <= set(JointType.REQUIRED)  # register_joint refuses a type without them
    for name, cls in JOINT_TYPES.items():
        assert cls.__module__ == f"mbsim.model.joints.{name}", f"joint type '{name}' lives in {cls.__module__}"
        for method in complete:
            assert method in vars(cls), f"joint type '{name}' does not implement {method}"
    names = set(JOINT_TYPES)
    for path in _modules():
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith("model/joints/") or rel == "solvers/soa_kernels.py":
            continue
        # the importers translate URDF/MJCF joint types into mbsim's, and `base: fixed` is a
        # model entry's base mode (models:, mbsim import --base), not a joint type
        if rel.startswith("models/") or rel == "cli/import_model.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, f"{rel} names the joint type '{node.value}' (line {node.lineno})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the mbsim modules it imports, at the top or inside a function (both run)."""
    paths = {_module_name(p): p for p in [*_modules(), *PACKAGE.rglob("*.pyx")]}
    graph = {}
    for name, path in paths.items():
        found = set()
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    # `from mbsim.solvers import lagrange` imports the submodule, not only the package
                    subs = {f"{node.module}.{a.name}" for a in node.names}
                    found |= {s if s in paths else node.module for s in subs}
        else:
            found = set(_cython_imports(path))
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def test_no_import_cycles():
    """Issue 29: modules import one way (the cycles cli.entry-cli.main, errors-interrupts and
    models-scene.spec are gone); a cycle found is listed with its members."""
    graph = _import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles: {cycles}"
