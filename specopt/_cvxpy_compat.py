"""Every use of CVXPY internals, in one place.

CVXPY (checked on 1.9.x) has no public registry for external atoms. specopt therefore

* adds its canonicalizers to ``CANON_METHODS`` (looked up by exact ``type(expr)`` and called as
  ``canon(expr, args, solver_context=...)``); they compose CVXPY's own canonicalizers for
  ``lambda_sum_largest``, ``log_det`` and ``log`` through :func:`canonicalize_atom`,
* appends its atoms to the cone-detection lists ``PSD_ATOMS`` / ``EXP_ATOMS`` so that automatic
  solver choice never hands them to a QP solver,
* registers ``method="specopt"`` through the public ``Problem.register_solve``,
* reads affine maps through ``CoeffExtractor`` (routes need the data matrices of affine
  expressions), and writes results through ``Problem.unpack`` with a ``Solution``,
* names the atom classes the analysis dispatches on (``reductions/analysis``: tables keyed by
  class, as ``CANON_METHODS``); several are not exported by ``cvxpy`` itself (``Sum``,
  ``Promote``, ``index``, ``MulExpression``, ...).

Registration is idempotent. Nothing else in specopt imports from ``cvxpy.reductions``,
``cvxpy.utilities`` or ``cvxpy.atoms.__init__`` lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

try:  # CVXPY >= 1.4
    from cvxpy.reductions.dcp2cone.canonicalizers import CANON_METHODS
except ImportError as exc:  # pragma: no cover - only on unsupported versions
    raise ImportError(
        "specopt needs cvxpy >= 1.9 (cvxpy.reductions.dcp2cone.canonicalizers not found)"
    ) from exc

import cvxpy.atoms as _cvxpy_atoms
from cvxpy import settings as _cps
from cvxpy.atoms.affine.add_expr import AddExpression as AddExpression
from cvxpy.atoms.affine.affine_atom import AffAtom as AffAtom  # base classes for specopt atoms
from cvxpy.atoms.affine.binary_operators import DivExpression as DivExpression
from cvxpy.atoms.affine.binary_operators import MulExpression as MulExpression
from cvxpy.atoms.affine.index import index as _index
from cvxpy.atoms.affine.promote import Promote as Promote
from cvxpy.atoms.affine.sum import Sum as Sum
from cvxpy.atoms.affine.trace import Trace as Trace
from cvxpy.atoms.affine.unary_operators import NegExpression as NegExpression
from cvxpy.atoms.atom import Atom as Atom
from cvxpy.atoms.pnorm import Pnorm as Pnorm
from cvxpy.atoms.quad_form import QuadForm as QuadForm
from cvxpy.lin_ops import lin_utils as _lu
from cvxpy.problems.problem import SolverStats
from cvxpy.reductions.inverse_data import InverseData
from cvxpy.reductions.solution import Solution
from cvxpy.reductions.solvers.conic_solvers.conic_solver import ConicSolver
from cvxpy.utilities.coeff_extractor import CoeffExtractor

# Atom classes the analysis dispatches on (exact class first, then along the MRO, so that
# PowerApprox reads as Power and PnormApprox as Pnorm): the CamelCase ones imported above (not
# exported by ``cvxpy``), the lower-case ones under CamelCase names (``abs``, ``index``, ``sum``
# would shadow builtins).
Abs, Conj, Index, Log, Log1p = cp.abs, cp.conj, _index, cp.log, cp.log1p
LambdaMax, LambdaSumLargest, LogDet = cp.lambda_max, cp.lambda_sum_largest, cp.log_det
Maximum, Minimum, Multiply, Norm1 = cp.maximum, cp.minimum, cp.multiply, cp.norm1
Power, PsdWrap, QuadOverLin = cp.Power, cp.psd_wrap, cp.quad_over_lin
Reshape, Transpose = cp.reshape, cp.transpose

MIN_CVXPY = (1, 9)


def cvxpy_version() -> tuple[int, ...]:
    parts = []
    for p in cp.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if cvxpy_version()[:2] < MIN_CVXPY:  # pragma: no cover
    raise ImportError(f"specopt needs cvxpy >= 1.9, found {cp.__version__}")


# --------------------------------------------------------------------------------------------
# Atom registration
# --------------------------------------------------------------------------------------------
def canonicalize_atom(atom: cp.Expression, solver_context=None) -> tuple[cp.Expression, list]:
    """Canonicalize one CVXPY atom whose arguments are already canonical (affine).

    Calls the canonicalizer CVXPY registered for ``type(atom)``; used by specopt's own
    canonicalizers to compose in-tree ones (``lambda_sum_largest``, ``log_det``, ``log``)
    without re-running ``Dcp2Cone`` over an expanded tree.
    """
    return CANON_METHODS[type(atom)](atom, list(atom.args), solver_context=solver_context)


def register_atom(
    atom_type: type, canon: Callable[..., Any], cones: Iterable[str] = ("PSD",)
) -> None:
    """Register ``atom_type`` with its canonicalizer and the cone families it needs."""
    CANON_METHODS[atom_type] = canon
    lists = {"PSD": _cvxpy_atoms.PSD_ATOMS, "EXP": _cvxpy_atoms.EXP_ATOMS}
    for cone in cones:
        target = lists[cone]
        if atom_type not in target:
            target.append(atom_type)


def register_solve_method(name: str, func: Callable[..., Any]) -> None:
    cp.Problem.register_solve(name, func)


def install_dcp_hint(hint_for: Callable[[cp.Problem], str | None]) -> None:
    """Make a plain ``prob.solve()`` that fails the DCP check say how specopt can help.

    CVXPY raises ``DCPError("Problem does not follow DCP rules. ...")`` in
    ``make_problem_form(problem, ...)`` (and ``construct_intermediate_chain(problem, ...)``),
    which look the name ``DCPError`` up in their modules. That name is replaced there by a
    subclass whose constructor appends
    ``hint_for(problem)`` (the ``problem`` of the raising frame) when there is one. Nothing wraps
    ``Problem.solve`` / ``_solve``: no specopt frame is on the stack of a solve, so CVXPY's
    warnings keep their origin (its ``warn`` attributes them to the first frame outside cvxpy,
    Python's ``stacklevel`` counts frames). ``except cp.error.DCPError`` still catches the error.
    Idempotent.
    """
    from cvxpy.problems import problem_form as _pf
    from cvxpy.reductions.solvers import intermediate_chain as _ic

    modules = [m for m in (_pf, _ic) if getattr(m, "DCPError", None) is not None]
    if all(getattr(m.DCPError, "_specopt_hint", False) for m in modules):
        return
    base = cp.error.DCPError

    class DCPError(base):  # type: ignore[valid-type,misc]
        """CVXPY's DCPError, with specopt's hint appended when specopt can solve the problem."""

        _specopt_hint = True

        def __init__(self, *args: Any) -> None:
            import sys

            problem = sys._getframe(1).f_locals.get("problem")
            hint = None
            if isinstance(problem, cp.Problem) and args and isinstance(args[0], str):
                try:
                    hint = hint_for(problem)
                except Exception:  # the hint must never replace CVXPY's own error
                    hint = None
            if hint:
                args = (f"{args[0]}\n\n{hint}", *args[1:])
            super().__init__(*args)

    for module in modules:
        module.DCPError = DCPError


def is_registered(atom_type: type) -> bool:
    return atom_type in CANON_METHODS


def linop_row_quad_forms(V: np.ndarray, arg_obj):
    """Linear operator ``sum((V @ X) .* V, axis=1)`` for the graph of ``row_quad_forms``.

    Built from the linear operators CVXPY itself uses for ``V @ X``, ``multiply`` and ``sum``, so
    only ``V`` (m x n) crosses into CVXPY's matrix builder, never the m x n^2 matrix.
    """
    m, n = V.shape
    VX = _lu.mul_expr(_lu.create_const(V, (m, n)), arg_obj, (m, n))
    prod = _lu.multiply(_lu.create_const(V, (m, n)), VX)
    return _lu.rmul_expr(prod, _lu.create_const(np.ones(n), (n,)), (m,))  # row sums, as cp.sum


# --------------------------------------------------------------------------------------------
# Reading affine maps
# --------------------------------------------------------------------------------------------
#: constant entries in an expression from which its coefficients are extracted with CVXPY's
#: SciPy canonicalization backend (interruptible) rather than the C++ one
SCIPY_EXTRACTION_MIN_DATA = 10**6


def affine_coefficients(
    expr: cp.Expression, variables: list[cp.Variable]
) -> tuple[dict[int, sp.csr_array], np.ndarray]:
    """Coefficients of an affine, parameter-free expression.

    Returns ``(coeffs, offset)`` with ``vec(expr) = sum_v coeffs[v.id] @ vec(v) + offset``,
    vectorization column-major (CVXPY's convention) and ``coeffs[v.id]`` of shape
    ``(expr.size, v.size)``. Variables of the expression not in ``variables`` are an error.
    """
    if not expr.is_affine():
        raise ValueError("affine_coefficients needs an affine expression")
    if expr.parameters():
        raise ValueError("affine_coefficients does not accept parameters")
    missing = {v.id for v in expr.variables()} - {v.id for v in variables}
    if missing:
        raise ValueError("expression has variables outside the given list")
    holder = cp.Problem(cp.Minimize(0), [v == 0 for v in variables])
    inverse = InverseData(holder)
    # large data: the SciPy backend, as fast as the C++ one there (faster on dense rows: 23 s
    # against 38 s for 20000 rows on a 30 x 30 variable) and, unlike it, it lets the main thread
    # run, so Ctrl-C interrupts a long extraction; small data: the C++ one (1.6x faster, measured
    # on a 110 x 110 SDP)
    big = sum(c.size for c in expr.constants()) >= SCIPY_EXTRACTION_MIN_DATA
    tensor = CoeffExtractor(inverse, cp.SCIPY_CANON_BACKEND if big else None).affine(expr)
    full = sp.csr_array(tensor.reshape((expr.size, inverse.x_length + 1), order="F"))
    coeffs: dict[int, sp.csr_array] = {}
    for v in variables:
        start = inverse.var_offsets[v.id]
        coeffs[v.id] = sp.csr_array(full[:, start : start + v.size])
    offset = full[:, [inverse.x_length]].toarray().ravel()
    return coeffs, offset


# --------------------------------------------------------------------------------------------
# Conic solve without touching the user's problem
# --------------------------------------------------------------------------------------------
def conic_solve(
    problem: cp.Problem, solver: str, verbose: bool = False, warm_start: bool = False,
    **solver_opts: Any,
) -> tuple[Solution, dict[str, Any]]:
    """Compile ``problem`` for ``solver``, solve, and invert to a ``Solution`` (not unpacked).

    Returns the solution (in the user's variables) and ``info`` with ``compile_time``,
    ``solve_time``, ``setup_time``, ``iterations`` and, where the solver reports them, the
    canonical primal/dual objectives ``pobj``/``dobj`` (their difference is the duality gap).
    """
    import time

    t0 = time.perf_counter()
    data, chain, inverse_data = problem.get_problem_data(
        solver, verbose=False, solver_opts=dict(solver_opts)
    )
    t1 = time.perf_counter()
    raw = _solve_via_data(chain, problem, data, warm_start, verbose, solver_opts)
    t2 = time.perf_counter()
    solution = chain.invert(raw, inverse_data)
    info: dict[str, Any] = {"compile_time": t1 - t0, "wall_solve_time": t2 - t1}
    attr = solution.attr or {}
    info["solve_time"] = attr.get(cp.settings.SOLVE_TIME, t2 - t1)
    info["setup_time"] = attr.get(cp.settings.SETUP_TIME)
    info["iterations"] = attr.get(cp.settings.NUM_ITERS)
    if isinstance(raw, dict) and isinstance(raw.get("info"), dict):  # SCS
        info["pobj"] = raw["info"].get("pobj")
        info["dobj"] = raw["info"].get("dobj")
        info["iterations"] = info["iterations"] or raw["info"].get("iter")
        info["raw_status"] = raw["info"].get("status")
    elif hasattr(raw, "obj_val") and hasattr(raw, "obj_val_dual"):  # Clarabel
        info["pobj"] = float(raw.obj_val)
        info["dobj"] = float(raw.obj_val_dual)
        info["iterations"] = info["iterations"] or getattr(raw, "iterations", None)
        info["raw_status"] = str(getattr(raw, "status", "")) or None
    info["canonical"] = _canonical_point(data, raw, inverse_data, chain)
    return solution, info


def _canonical_point(data: dict, raw: Any, inverse_data: Any, chain: Any) -> dict | None:
    """The canonical form ``min 1/2 x'Px + c'x + d, Ax + s = b, s in K`` CVXPY gave SCS or
    Clarabel and the solver's ``x`` and dual ``y`` (for ``specopt.conic_bound``), else None."""
    try:
        if isinstance(raw, dict) and "y" in raw:  # SCS
            x, y = raw.get("x"), raw.get("y")
        elif hasattr(raw, "z") and hasattr(raw, "x"):  # Clarabel
            x, y = np.asarray(raw.x), np.asarray(raw.z)
        else:
            return None
        return {"A": data["A"], "b": data["b"], "c": data["c"], "P": data.get("P"),
                "dims": data["dims"], "offset": float(inverse_data[-1]["offset"]),
                "x": x, "y": y, "upper_triangle": "UPPER" in str(
                    getattr(chain.solver, "PSD_TRIANGLE_KIND", ""))}
    except (KeyError, TypeError, IndexError, AttributeError):
        return None


#: Clarabel's constructor holds the GIL while it assembles the KKT system; its cost grows as
#: the sum over PSD cones of d^2, d = n (n + 1) / 2 the cone's svec size (a dense d x d block
#: each). Measured: n = 100 (d^2 = 2.6e7) 1.0 s, n = 200 (4.0e8) 74 s at load 7. Above this
#: figure (about a second on a quiet core) the solve runs in a child process, so Ctrl-C is not
#: held up until the constructor returns (a worker thread cannot help: the SIGINT handler
#: needs the GIL). The child costs ~0.1-2 s to start, small against such a solve.
CLARABEL_ISOLATE_MIN_PSD_WORK = 2.0e7


def clarabel_setup_work(data: dict) -> float:
    """``sum d^2`` over the PSD cones of CVXPY's conic data (``data["dims"].psd``: orders n)."""
    dims = data.get("dims") if isinstance(data, dict) else None
    orders = getattr(dims, "psd", None) or []
    return float(sum((n * (n + 1) / 2) ** 2 for n in orders))


#: Clarabel statuses that settle a solve; any other (AlmostSolved, MaxIterations,
#: InsufficientProgress, NumericalError, ...) is retried on the LMI form when it applies
CLARABEL_SETTLED = ("Solved", "PrimalInfeasible", "DualInfeasible")


def _clarabel_plain(sol: Any) -> Any:
    """A Clarabel solution as a plain, picklable namespace with what CVXPY's ``invert`` and
    specopt read (``status`` as Clarabel's status name)."""
    from types import SimpleNamespace

    fields = ("x", "z", "s", "obj_val", "obj_val_dual", "solve_time", "iterations", "r_prim",
              "r_dual")
    out = {f: getattr(sol, f, None) for f in fields}
    for f in ("x", "z", "s"):
        out[f] = None if out[f] is None else np.asarray(out[f], dtype=float)
    out["status"] = str(sol.status)
    return SimpleNamespace(**out)


def _clarabel_lmi(solver: Any, data: dict, verbose: bool, solver_opts: dict) -> Any | None:
    """Clarabel on the LMI form of ``data`` (see ``specopt.conic_lmi``), mapped back to the
    original program's solution; None when ``data`` is not in dual standard form."""
    import copy

    from .conic_lmi import lmi_form, recover

    dims = data[ConicSolver.DIMS]
    form = lmi_form(data[_cps.A], data[_cps.B], data[_cps.C], int(dims.zero), data.get(_cps.P))
    if form is None:
        return None
    lmi_dims = copy.copy(dims)
    lmi_dims.zero = 0
    lmi_data = {_cps.A: form.G, _cps.B: form.h, _cps.C: form.q, ConicSolver.DIMS: lmi_dims}
    sol = _clarabel_plain(solver.solve_via_data(lmi_data, False, verbose, dict(solver_opts)))
    return recover(form, sol.x, sol.z, sol.status, solve_time=sol.solve_time,
                   iterations=sol.iterations, r_prim=sol.r_prim, r_dual=sol.r_dual)


def _clarabel_solve(solver: Any, data: dict, verbose: bool, solver_opts: dict,
                    lmi_first: bool = True) -> Any:
    """Clarabel's solve of CVXPY's conic ``data`` as a plain, picklable namespace (so it also
    runs in a child process, :func:`_solve_via_data`), in the order :func:`_clarabel_best`
    chooses between the given form and the LMI form."""
    return _clarabel_best(
        lambda: _clarabel_plain(solver.solve_via_data(data, False, verbose, dict(solver_opts))),
        lambda: _clarabel_lmi(solver, data, verbose, solver_opts), data, lmi_first=lmi_first)


#: The LMI form is tried first when it drops at least this many variables per equality row
#: (``n_x >= LMI_FIRST_RATIO * m_E``): Clarabel on SDPLIB's mcp100 (5050 variables, 100 rows)
#: takes 54.5 s in the given form and 1.1 s in the LMI form, gpp100 147 s and 126 s, theta1
#: (1275, 104) 0.93 s inaccurate and 0.84 s certified, control2 (265, 66) 0.26 s 8e-6 off and
#: 0.07 s 5.6e-8 off. Below the ratio the given form goes first (hinf1 (27, 13): 2.6e-8 in the
#: given form, 3.3e-5 in the LMI form; control1 (70, 21): the LMI primal misses the rows).
LMI_FIRST_RATIO = 4
#: ... and when the given form is large enough for its size to cost time (variables plus
#: equality rows): below, Clarabel's given form is fast and its primal meets the rows exactly
#: (a spectraplex of order 4: the LMI primal left the objective 3e-9 below the proven bound).
LMI_FIRST_MIN_SIZE = 300
#: An LMI answer tried first is kept when its recovered primal meets the equality rows to this
#: relative residual (:func:`_eq_residual`); else the given form is solved too.
LMI_RESIDUAL_OK = 1e-6


def _clarabel_best(given: Callable[[], Any], lmi: Callable[[], Any | None],
                   data: dict, *, lmi_first: bool = True) -> Any:
    """Clarabel's answer on the given form (``given()``) or the LMI form (``lmi()``, None when
    the program has none). The LMI form goes first when it is much smaller
    (:data:`LMI_FIRST_RATIO`) and is kept if ``Solved`` with a small recovered residual;
    otherwise the given form is solved and an unsettled answer is compared with the LMI one
    (:func:`_prefer_lmi`). ``lmi_first=False`` keeps the given form first whatever the sizes:
    specopt's own subproblems (:func:`solve_in_place`), whose callers compare objective values
    across steps to ~1e-6, where the LMI answer can be ~1e-5 less accurate."""
    A = data[_cps.A]
    m_E = int(data[ConicSolver.DIMS].zero)
    tried = None
    if (lmi_first and m_E and A.shape[1] >= LMI_FIRST_RATIO * m_E
            and A.shape[1] + m_E > LMI_FIRST_MIN_SIZE):
        tried = lmi()
        if (tried is not None and str(tried.status) == "Solved"
                and _eq_residual(tried, data) <= LMI_RESIDUAL_OK):
            return tried
    sol = given()
    if str(getattr(sol, "status", "Solved")) in CLARABEL_SETTLED:
        return sol
    return _prefer_lmi(sol, tried if tried is not None else lmi(), data)


def _prefer_lmi(first: Any, lmi: Any | None, data: dict) -> Any:
    """The LMI form's answer when it settled the problem (``Solved`` or a certificate of
    infeasibility) where Clarabel's first answer did not, and its recovered primal meets the
    equality rows at least as well as the first answer's; else the first answer, so the retry
    never makes a solve worse. Measured on SDPLIB (``benchmarks/sdplib.py`` backend
    ``clarabel-lmi``): control2 ends AlmostSolved 8.0e-6 from the published optimum in its given
    form and Solved 5.6e-8 in the LMI form. The LMI form is not better everywhere: on control1
    it ends Solved, but the primal recovered from its multipliers misses the equality rows by
    4e-2 (the given form: AlmostSolved, 1.1e-6 off), hence the residual test."""
    if lmi is None or str(lmi.status) not in CLARABEL_SETTLED:
        return first
    if str(lmi.status) != "Solved":
        return lmi
    return lmi if _eq_residual(lmi, data) <= max(_eq_residual(first, data), 1e-9) else first


def _eq_residual(sol: Any, data: dict) -> float:
    """``||A_E x - b_E||_inf / (1 + ||b_E||_inf)`` of a solution's primal on the equality rows
    (``inf`` without a primal)."""
    x = getattr(sol, "x", None)
    if x is None:
        return float("inf")
    m = int(data[ConicSolver.DIMS].zero)
    b_E = np.asarray(data[_cps.B][:m], dtype=float)
    r = data[_cps.A][:m] @ np.asarray(x, dtype=float) - b_E
    return float(np.max(np.abs(r), initial=0.0) / (1.0 + np.max(np.abs(b_E), initial=0.0)))


def clarabel_options(data: dict, solver_opts: dict) -> dict:
    """``solver_opts`` with ``max_threads`` from specopt's thread limit (``specopt._threads``)
    where the caller set none and the program has a PSD cone: Clarabel's default (0) runs its
    ``faer`` factorization on every core. One linearized MVE step on digits N = 60 (11
    iterations), quiet machine: 2.38 s on every core, 1.90 s on one."""
    out = dict(solver_opts)
    if data[ConicSolver.DIMS].psd:
        from ._threads import current_threads

        out.setdefault("max_threads", current_threads())
    return out


def _solve_via_data(chain, problem, data, warm_start, verbose, solver_opts,
                    lmi_first: bool = True):
    """``chain.solve_via_data`` run so that Ctrl-C raises KeyboardInterrupt within ~0.05 s:
    in a worker thread, or for a Clarabel solve whose constructor would hold the GIL for more
    than about a second, in a child process (see :data:`CLARABEL_ISOLATE_MIN_PSD_WORK`).
    Clarabel gets the given form or the LMI form in the order :func:`_clarabel_best` picks."""
    from ._interrupt import call_in_subprocess, call_interruptibly, scs_interrupted

    clarabel = getattr(chain.solver, "name", lambda: "")() == "CLARABEL"
    if clarabel:
        solver_opts = clarabel_options(data, solver_opts)
    if clarabel and clarabel_setup_work(data) > CLARABEL_ISOLATE_MIN_PSD_WORK:
        return call_in_subprocess(_clarabel_solve, chain.solver, data, verbose,
                                  dict(solver_opts), lmi_first)
    def given() -> Any:
        return call_interruptibly(chain.solve_via_data, problem, data, warm_start, verbose,
                                  solver_opts)

    if clarabel:
        return _clarabel_best(given, lambda: call_interruptibly(
            _clarabel_lmi, chain.solver, data, verbose, solver_opts), data, lmi_first=lmi_first)
    raw = given()
    if scs_interrupted(raw):  # SCS caught SIGINT itself and stopped
        raise KeyboardInterrupt
    return raw


def solve_in_place(
    problem: cp.Problem, solver: str, warm_start: bool = False, verbose: bool = False,
    lmi_first: bool = False, **solver_opts: Any,
) -> float:
    """``problem.solve(solver=..., ...)`` (values written into *this* problem, DPP cache and
    warm start kept) through the public ``get_problem_data`` / ``solve_via_data`` /
    ``unpack_results``, with the solve interruptible by Ctrl-C. Returns the compile seconds.
    Used for specopt's own internal problems (never the user's). Clarabel solves the given form
    first, its LMI form when that does not settle; ``lmi_first``: the LMI form first, by the
    size rule of :func:`_clarabel_best` (for subproblems where the given form is known to end
    ``AlmostSolved``)."""
    import time

    t0 = time.perf_counter()
    data, chain, inverse_data = problem.get_problem_data(
        solver, verbose=False, solver_opts=dict(solver_opts)
    )
    compile_time = time.perf_counter() - t0
    raw = _solve_via_data(chain, problem, data, warm_start, verbose, solver_opts,
                          lmi_first=lmi_first)
    problem.unpack_results(raw, chain, inverse_data)
    return compile_time


# --------------------------------------------------------------------------------------------
# Writing results back
# --------------------------------------------------------------------------------------------
def unpack_result(
    problem: cp.Problem,
    status: str,
    primal: dict[int, np.ndarray],
    dual: dict[int, Any],
    opt_val: float | None,
    solver_name: str,
    attr: dict[str, Any],
    reported_status: str | None = None,
) -> None:
    """Write values, duals and status into ``problem`` the way CVXPY's own solve does.

    ``reported_status`` replaces the status afterwards (used for statuses CVXPY does not know,
    such as a stationary point of a non-convex route).
    """
    from ._values import restore, snapshot

    solution = Solution(status, opt_val, primal, dual, attr)
    saved = snapshot(problem)
    try:
        problem.unpack(solution)
    except BaseException:
        restore(saved)  # a write-back that fails part way leaves the model as it was
        raise
    problem._solver_stats = SolverStats.from_dict(attr, solver_name)
    if reported_status is not None:
        problem._status = reported_status


def set_compilation_time(problem: cp.Problem, seconds: float) -> None:
    problem._compilation_time = seconds


SOLUTION_PRESENT = tuple(cp.settings.SOLUTION_PRESENT)
INF_OR_UNB = tuple(cp.settings.INF_OR_UNB)
