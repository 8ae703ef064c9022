"""The import direction of STYLE.md §2, checked on the source: lower layers never import higher ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mbsim"

# layer of each top-level part of the package; a module may import only its own layer or lower
LAYER = {
    "errors": 0,
    "interrupts": 0,
    "scene": 1,
    "model": 2,
    "diagnostics": 3,
    "output": 3,
    "solvers": 3,
    "simulate": 4,
    "compare": 4,
    "assertions": 4,
    "sweep": 4,
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


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


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
        if str(path.relative_to(PACKAGE)) in PURE:
            pytest.fail(f"{path.name} must not import from mbsim, imports {name}")
        assert LAYER[target] <= LAYER[part] or target == part, f"{part} must not import {name}"
        if part in ("diagnostics", "output"):
            assert target in ("model", "errors", "output", "diagnostics", "scene"), f"{part} imports {name}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_cli_imports_click_and_exits(path):
    if _part(path) == "cli":
        return
    assert not any(n == "click" or n.startswith("click.") for n in _imports(path)), f"{path} imports click"
    assert "sys.exit" not in path.read_text(encoding="utf-8"), f"{path} calls sys.exit"
