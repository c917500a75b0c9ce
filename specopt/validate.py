"""Input checks shared by the routes: clear errors for what specopt cannot handle."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

import cvxpy as cp
import numpy as np


def check_problem(problem: cp.Problem) -> None:
    """Reject what no specopt route handles (integer / boolean variables)."""
    for v in problem.variables():
        if v.attributes.get("boolean") or v.attributes.get("integer"):
            raise cp.error.SolverError(
                f"specopt routes do not handle integer variables: variable {v.name()!r} is "
                f"{'boolean' if v.attributes.get('boolean') else 'integer'}; solve the problem "
                "with a mixed-integer solver (prob.solve(solver=...)) instead"
            )


def check_options(route: str, given: Iterable[str], known: Iterable[str],
                  where: str | None = None) -> None:
    """Unknown options are an error naming the known ones (and the closest match)."""
    known = sorted(set(known))
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    hints = []
    for u in unknown:
        close = difflib.get_close_matches(u, known, n=1)
        if close:
            hints.append(f"{u!r} (did you mean {close[0]!r}?)")
        else:
            hints.append(repr(u))
    raise ValueError(
        f"unknown option(s) for {where or f'route {route!r}'}: {', '.join(hints)}; "
        f"the known options are: {', '.join(known)}"
    )


def check_positive(name: str, value: Any, *, allow_none: bool = False, integer: bool = False,
                   allow_zero: bool = False) -> None:
    """``value`` must be a finite number > 0 (>= 0 with ``allow_zero``), or None if allowed."""
    if value is None and allow_none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok:
        kind = "an integer" if integer else "a finite number"
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {kind} {rel}, got {value!r}")


#: Numeric options shared by the routes: name -> (integer, minimum allowed, minimum inclusive)
_NUMERIC_OPTIONS = {
    "tol": (False, 0.0, True), "tol_K": (False, 0.0, True), "monotone_tol": (False, 0.0, True),
    "max_iters": (True, 1, True), "max_sweeps": (True, 1, True), "max_passes": (True, 1, True),
    "scs_max_iters": (True, 1, True), "max_iter": (True, 1, True),
    "time_limit": (False, 0.0, False), "restarts": (True, 0, True),
    "check_every": (True, 1, True), "max_columns": (True, 1, True),
    "columns_per_round": (True, 1, True), "row_selection": (True, 1, True),
    "eps_abs": (False, 0.0, True), "eps_rel": (False, 0.0, True),
}


def check_numeric_options(opts: dict[str, Any]) -> None:
    """Reject NaN, infinite, negative or (for counts) fractional values of the shared options.

    ``time_limit=None`` is allowed (no limit); booleans are not numbers here.
    """
    for name, value in opts.items():
        spec = _NUMERIC_OPTIONS.get(name)
        if spec is None or (value is None and name == "time_limit"):
            continue
        integer, lo, inclusive = spec
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, bool)
        if ok:
            v = float(value)
            ok = math.isfinite(v) and (v >= lo if inclusive else v > lo)
            if ok and integer:
                ok = v.is_integer()
        if not ok:
            kind = "an integer" if integer else "a finite number"
            rel = (">=" if inclusive else ">") + f" {lo:g}"
            raise ValueError(f"option {name} must be {kind} {rel}, got {value!r}")


#: SCS 3 settings (and CVXPY's SCS interface's own) accepted by the conic route.
SCS_OPTIONS = (
    "max_iters", "eps_abs", "eps_rel", "eps_infeas", "alpha", "time_limit_secs", "verbose",
    "normalize", "scale", "adaptive_scale", "rho_x", "acceleration_lookback",
    "acceleration_interval", "write_data_filename", "log_csv_filename", "warm_start",
    "use_indirect", "gpu", "use_quad_obj", "mkl",
)


def conic_backend_options(backend: str) -> tuple[str, ...] | None:
    """Names of the options a conic backend accepts, or None when specopt does not check."""
    backend = backend.upper()
    if backend == "SCS":
        return SCS_OPTIONS
    if backend == "CLARABEL":
        try:
            import clarabel
        except ImportError:  # pragma: no cover
            return None
        names = [a for a in dir(clarabel.DefaultSettings()) if not a.startswith("_")]
        return (*names, "warm_start")
    return None


def check_finite(what: str, values: Any, *, allow_inf: bool = False) -> None:
    """ValueError naming ``what`` when ``values`` (array, sparse matrix or scalar) has a NaN,
    or an infinite entry unless ``allow_inf`` (bounds)."""
    data = values.data if hasattr(values, "tocsr") and hasattr(values, "data") else values
    arr = np.asarray(data, dtype=float)
    bad = np.isnan(arr) if allow_inf else ~np.isfinite(arr)
    if bad.any():
        kind = "NaN" if allow_inf or np.isnan(arr[bad]).any() else "infinite"
        raise ValueError(f"{what} contains {kind} entries ({int(bad.sum())} of {arr.size})")
