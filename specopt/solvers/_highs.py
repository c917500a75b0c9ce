"""A HiGHS model without HiGHS's start-up banner.

``highspy.Highs()`` prints "Running HiGHS ... Copyright ..." to the C-level stdout the first time
a model is created in a process, before any option can be set. :func:`new_highs` creates the
model with file descriptor 1 pointed at ``/dev/null`` for that moment (unless ``verbose``), then
sets ``output_flag`` / ``log_to_console`` so that the solves are silent as well.

:func:`run_highs` runs a model so that Ctrl-C interrupts it within ~0.05 s (HiGHS releases the
GIL; the solve runs in a worker thread, see ``specopt._interrupt``) and cancels the abandoned
solve through HiGHS's user-interrupt callback, so that it does not run on (or loop, on bad
data) in the background.
"""

from __future__ import annotations

import os
import sys

import highspy
import numpy as np
import scipy.sparse as sp

_BANNER_SHOWN = False


def new_highs(verbose: bool = False) -> highspy.Highs:
    """``highspy.Highs()`` with its banner and log silenced unless ``verbose``."""
    global _BANNER_SHOWN
    if verbose or _BANNER_SHOWN:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        try:
            saved = os.dup(1)
        except OSError:  # no usable fd 1 (embedded interpreters): nothing to silence
            saved = None
        if saved is None:
            h = highspy.Highs()
        else:
            try:
                with open(os.devnull, "w") as null:
                    os.dup2(null.fileno(), 1)
                    try:
                        h = highspy.Highs()
                    finally:
                        os.dup2(saved, 1)
            finally:
                os.close(saved)
    _BANNER_SHOWN = True
    h.setOptionValue("output_flag", bool(verbose))
    h.setOptionValue("log_to_console", bool(verbose))
    h.HandleUserInterrupt = True  # lets cancelSolve stop a running solve (callback, ~free)
    return h


def run_highs(h: highspy.Highs) -> highspy.HighsStatus:
    """``h.run()``, interruptible by Ctrl-C (KeyboardInterrupt; the solve is cancelled)."""
    from .._interrupt import call_interruptibly

    return call_interruptibly(h.run, on_interrupt=h.cancelSolve)


def highs_bounds(a: np.ndarray) -> np.ndarray:
    """Bounds in HiGHS' range (``+-inf`` as ``+-kHighsInf``)."""
    inf = highspy.kHighsInf
    return np.clip(np.nan_to_num(a, posinf=inf, neginf=-inf), -inf, inf)


def add_empty_rows(h: highspy.Highs, lo: np.ndarray, hi: np.ndarray) -> None:
    """Append ``lo.size`` rows with these bounds and no coefficients yet."""
    h.addRows(lo.size, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))


def add_csc_cols(h: highspy.Highs, cost, lo: np.ndarray, hi: np.ndarray,
                 M: sp.csc_array) -> None:
    """Append the columns of ``M`` (over the rows of ``h``) with their costs and bounds."""
    h.addCols(M.shape[1], np.asarray(cost, float), lo, hi, M.nnz, M.indptr.astype(np.int32),
              M.indices.astype(np.int32), M.data.astype(float))
