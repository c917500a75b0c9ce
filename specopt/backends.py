"""Which conic solvers are usable here: installed, and for MOSEK licensed.

Which one a problem gets (by the size of its conic form) is decided one layer up, where the
problem's normalized description is read: :mod:`specopt.reductions.conic_size`.
"""

from __future__ import annotations

import functools
import os

import cvxpy as cp

GENERIC_BACKENDS = ("CLARABEL", "SCS", "MOSEK")


@functools.lru_cache(maxsize=1)
def _installed_solvers() -> tuple[str, ...]:
    return tuple(cp.installed_solvers())


def installed_solvers() -> list[str]:
    """CVXPY's installed solvers, asked once per process: ``cp.installed_solvers()`` tries to
    import every solver module on each call (~8 ms here), and a solve asked it three times,
    a fixed cost that made ``specopt.solve`` up to 2x slower than CVXPY on small problems
    (``benchmarks/conic_forms.py``, end-to-end part)."""
    return list(_installed_solvers())


@functools.lru_cache(maxsize=1)
def mosek_status() -> tuple[bool, str]:
    """``(usable, reason)``: whether MOSEK is installed and has a working licence."""
    if os.environ.get("SPECOPT_DISABLE_MOSEK"):
        return False, "disabled by SPECOPT_DISABLE_MOSEK"
    if "MOSEK" not in installed_solvers():
        return False, "MOSEK is not installed (pip install 'specopt[mosek]')"
    try:
        import mosek

        with mosek.Env() as env:
            env.checkoutlicense(mosek.feature.pts)
    except Exception as exc:  # any licence problem: missing file, expired, no server
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return False, f"MOSEK has no working licence ({msg[:120]})"
    return True, "licensed"


def mosek_licensed() -> bool:
    return mosek_status()[0]


def backend_status(name: str) -> tuple[bool, str]:
    """``(usable, reason)`` for a CVXPY solver name."""
    name = name.upper()
    if name == "MOSEK":
        return mosek_status()
    if name not in installed_solvers():
        return False, f"{name} is not installed"
    return True, "installed"


def available_backends() -> list[str]:
    """Generic conic backends usable here, in order of preference."""
    return [b for b in GENERIC_BACKENDS if backend_status(b)[0]]
