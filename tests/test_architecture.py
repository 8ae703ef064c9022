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
    "analysis": 4,  # issue 32: equilibrium, linearisation, modes (model and solvers below it)
    "compare": 4,
    "assertions": 4,
    "sweep": 4,
    "verify": 4,
    "docs": 5,
    "api": 5,  # the Python API (mbsim.load): over simulate, under the command line that uses it
    "cli": 6,
    "__main__": 7,
    "__init__": 0,
}
# modules that must not import anything from mbsim
PURE = {
    "model/spatial.py",
    "solvers/numerics/lcp.py",
    "solvers/gauss/optimize.py",
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


def test_typed_structures_share_one_base():
    """Issue 29, item 3: every typed structure of the compiled core (a cdef class that declares
    memoryview fields and no methods: not an integrator's state or an evaluator, which are objects
    with behaviour) derives from layout.Record, which alone reads, lists and pickles fields."""
    import re

    loose = []
    for path in PACKAGE.rglob("*.pxd"):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^cdef class (\w+)(\((\w+)\))?:\n((?:    .*\n|\n)*)", text, re.MULTILINE):
            name, base, body = match.group(1), match.group(3), match.group(4)
            record = "[::1]" in body and "(self" not in body and "cdef public" not in body
            if record and name != "Record" and base is None:  # a subclass of System etc. has behaviour
                loose.append(f"{path.name}: {name}")
    assert loose == [], f"typed structures not deriving from layout.Record: {loose}"
    own = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.pyx")
        if p.name != "layout.pyx" and re.search(r"def (__getattr__|_asdict)\(", p.read_text(encoding="utf-8"))
    ]
    assert own == [], f"a second field accessor in {own} (layout.Record has the one)"


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
    *(str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "solvers").rglob("*.py"))),
]
# hasattr/getattr on objects that are not mbsim's: (module, the probed name): scipy's integrator
# objects (their internals), scipy.integrate itself (an integrator by name) and a YAML parser's exception
FOREIGN_ATTRIBUTE_CHECKS = {
    ("solvers/ode/integrators.py", "solver"),
    ("solvers/ode/integrators.py", "scipy.integrate"),
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
        if rel.startswith("model/joints/") or rel == "solvers/recursive/soa_kernels.py":
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


# Issue 29, one implementation per stage: where Python evaluates a compiled stage once (initial
# assembly, evaluate, diagnostics, the Python loops of timestepping and event_driven), it calls
# the compiled function; it never redoes the arithmetic in numpy. (stage, module, function,
# the compiled modules it must reach).
STAGES = [
    ("spring-dampers", "model/forces/spring_damper.py", "SpringDamperGroup.evaluate", {"force_kernels"}),
    ("applied loads", "model/forces/applied.py", "Loads.evaluate", {"force_kernels"}),
    ("forces on joint coordinates, signals, actuators", "model/dynamics.py", "applied_forces", {"step_kernels"}),
    ("constraint rows", "model/constraints.py", "constraint_values", {"step_kernels"}),
    ("joint-spring coordinates", "model/constraints.py", "coordinate_rows", {"step_kernels"}),
    ("fixed-step integrators", "solvers/ode/integrators.py", "FixedStep.__call__", {"integrate"}),
    ("embedded pairs RK45, DOP853", "solvers/ode/integrators.py", "EmbeddedPair.step", {"integrate"}),
    ("variational step", "solvers/variational/__init__.py", "Solver.step", {"variational_kernels"}),
    ("ODE acceleration solve", "solvers/ode/__init__.py", "OdeSolver.acceleration", {"ode_kernels"}),
    ("ODE right-hand side", "solvers/ode/__init__.py", "OdeSolver.derivative", {"ode_kernels"}),
    ("ODE evaluation (recorded rows)", "solvers/ode/__init__.py", "OdeSolver.evaluate", {"ode_kernels"}),
    ("rigid contact narrow phase", "model/contact/narrowphase.py", "_compiled", {"narrowphase_kernels"}),
]
# numpy calls that mean kinematics or dynamics arithmetic (array plumbing -- zeros, concatenate,
# indexing -- and a power as a dot product are Python's job)
ARITHMETIC = {
    "einsum", "cross", "dot", "matmul", "outer", "inner", "tensordot", "sin", "cos", "tan", "arctan2",
    "arcsin", "arccos", "sqrt", "exp", "log", "hypot", "norm", "solve", "lstsq", "svd", "qr", "cholesky",
    "pinv", "inv", "eigh", "eigvalsh",
}  # fmt: skip


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    body: list[ast.stmt] = tree.body
    node = None
    for part in qualname.split("."):
        node = next(n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part)
        body = node.body
    assert isinstance(node, ast.FunctionDef)
    return node


def _reached(tree: ast.Module, start: ast.FunctionDef) -> list[ast.FunctionDef]:
    """``start`` and the module's own functions and methods it calls (by name or self.name), transitively."""
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    seen, todo = {start.name: start}, [start]
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in defs and name not in seen and not name.startswith("__"):
                    seen[name] = defs[name]
                    todo.append(defs[name])
    return list(seen.values())


def _compiled_aliases(tree: ast.Module, compiled: set[str]) -> set[str]:
    """Local names bound to the compiled modules (``import mbsim.x.k as a``, ``from mbsim.x import k``,
    ``from mbsim.x.k import f``), at module level or in a function."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name.rsplit(".", 1)[-1] in compiled}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.rsplit(".", 1)[-1] in compiled:
                names |= {a.asname or a.name for a in node.names}
            else:
                names |= {a.asname or a.name for a in node.names if a.name in compiled}
    return names


@pytest.mark.parametrize("stage, rel, qualname, compiled", STAGES, ids=[s[0] for s in STAGES])
def test_each_stage_is_computed_once_by_its_compiled_function(stage, rel, qualname, compiled):
    tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
    assert all(any(PACKAGE.rglob(f"{c}.pyx")) for c in compiled), compiled
    functions = _reached(tree, _function(tree, qualname))
    aliases = _compiled_aliases(tree, compiled)
    used = {n.id for f in functions for n in ast.walk(f) if isinstance(n, ast.Name)}
    assert used & aliases, f"{stage}: {rel} {qualname} does not call {sorted(compiled)}"
    arithmetic = sorted(
        f"{f.name}: line {n.lineno}"
        for f in functions
        for n in ast.walk(f)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ARITHMETIC
    )
    assert arithmetic == [], f"{stage}: numpy arithmetic next to the compiled stage in {rel}: {arithmetic}"
