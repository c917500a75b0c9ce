"""The matrix-generation package keeps its house plan: imports point down a fixed order of layers
(no circle), no CVXPY, and in-function imports only for the optional Dask extra."""

from __future__ import annotations

import ast
from pathlib import Path

import specopt.solvers.mg as mg

#: bottom to top: a module may import only modules listed before it
LAYERS = ("_lazy_rows", "_result", "_operators", "_problem", "dask_rows", "_block", "_bound",
          "lp_master", "psd_master", "cuts", "_dask_hinge", "__init__")
PACKAGE = Path(mg.__file__).parent


def _imports(tree: ast.Module):
    """``(module imported, inside a function)`` for every import statement."""
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) not in top
        elif isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
            yield name, id(node) not in top


def test_every_module_is_in_a_layer():
    assert {p.stem for p in PACKAGE.glob("*.py")} == set(LAYERS)


def test_imports_point_down_and_never_reach_cvxpy():
    for rank, name in enumerate(LAYERS):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        for mod, nested in _imports(tree):
            assert not mod.split(".")[0] == "cvxpy", f"{name} imports cvxpy"
            if nested:
                assert mod.split(".")[0] == "dask", f"{name} imports {mod} inside a function"
            if mod.startswith(".") and not mod.startswith(".."):
                target = mod[1:].split(".")[0]
                assert target in LAYERS[:rank], f"{name} imports {target}, not below it"


def test_master_solver_rule_both_sides():
    """The PSD-block master goes to the interior point for blocks of at least 12 whose svec
    size is at least a quarter of the rows, up to _IP_MAX_ROWS rows; Clarabel otherwise."""
    from specopt.solvers.mg import _block

    cap = _block._IP_MAX_ROWS
    assert _block.use_interior_point(12, 2 * 12 * 13)
    assert not _block.use_interior_point(11, 10)  # small block
    assert not _block.use_interior_point(20, 2 * 20 * 21 + 1)  # rows dominate the block
    assert _block.use_interior_point(40, cap)
    assert not _block.use_interior_point(40, cap + 1)  # row-heavy master
    # rows given by rank-one terms: the cheaper factored Schur complement allows more rows
    capf = _block._IP_MAX_ROWS_FACTORED
    assert capf > cap
    assert _block.use_interior_point(40, cap + 1, factored=True)
    assert _block.use_interior_point(40, capf, factored=True)
    assert not _block.use_interior_point(40, capf + 1, factored=True)
    assert not _block.use_interior_point(11, 10, factored=True)
