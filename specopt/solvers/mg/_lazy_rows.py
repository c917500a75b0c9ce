r"""Tall row matrices kept lazy: what :class:`~specopt.solvers.mg.dask_rows.DaskRowOperator`
returns for ``quad`` / ``quad_pairs`` (the matrix-generation solver only scales, slices,
contracts or selects rows of them, so nothing with ``m`` rows is computed on the client).

Plain numpy: a part that lives in Dask is an :class:`_OpRows`, which calls its operator's passes
(``rows_matvec``, ``rows_rmatvec``, ``rows_take``) when the solver contracts or selects rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LazyRows", "stack_rows"]

class _OpRows:
    """Rows ``[lo, hi)`` of ``op.quad`` / ``op.quad_pairs`` at ``arg`` (never materialized)."""

    def __init__(self, op, kind: str, arg: np.ndarray, q: int,
                 lo: int = 0, hi: int | None = None):
        self.op, self.kind, self.arg, self.q = op, kind, arg, q
        self.lo, self.hi = lo, op.m if hi is None else hi

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    def sub(self, a: int, b: int) -> _OpRows:
        return _OpRows(self.op, self.kind, self.arg, self.q, self.lo + a, self.lo + b)

    def matvec(self, scale, v):
        return self.op.rows_matvec(self.kind, self.arg, scale, v, self.lo, self.hi)

    def rmatvec(self, scale, w):
        full = np.zeros(self.op.m)
        full[self.lo: self.hi] = w
        return self.op.rows_rmatvec(self.kind, self.arg, scale, full, self.q)

    def take(self, scale, rows):
        return self.op.rows_take(self.kind, self.arg, scale, np.asarray(rows) + self.lo, self.q)


class LazyRows:
    """A tall (rows, q) matrix stacked from numpy parts and Dask row blocks, kept lazy.

    Supports what the matrix-generation solver does with ``quad`` / ``quad_pairs`` results:
    ``* scale`` (columns), ``[i]``, ``[a:b]``, ``[index array or mask]`` (computes only those
    rows), ``@ v`` (one pass, returns the (rows,) vector), ``.T @ w`` (one pass, (q,)) and
    ``np.asarray`` (materializes: block by block, for the LP master).
    """

    ndim = 2

    def __init__(self, parts: list, scale=1.0):
        flat = []
        for p in parts:
            if isinstance(p, LazyRows):
                if not np.all(np.asarray(p.scale) == 1.0):
                    raise ValueError("cannot stack scaled LazyRows")
                flat.extend(p.parts)
            elif isinstance(p, _OpRows):
                flat.append(p)
            else:
                flat.append(np.atleast_2d(np.asarray(p, dtype=float)))
        self.parts = flat
        qs = {p.q if isinstance(p, _OpRows) else p.shape[1] for p in flat}
        if len(qs) != 1:
            raise ValueError(f"stacked parts have different widths {sorted(qs)}")
        self.q = qs.pop()
        self.scale = scale

    @property
    def shape(self) -> tuple[int, int]:
        return (sum(_nrows(p) for p in self.parts), self.q)

    def __len__(self) -> int:
        return self.shape[0]

    def __mul__(self, scale) -> LazyRows:
        out = LazyRows(self.parts)
        out.scale = np.asarray(self.scale) * np.asarray(scale, dtype=float)
        return out

    __rmul__ = __mul__

    def _offsets(self):
        return np.concatenate([[0], np.cumsum([_nrows(p) for p in self.parts])]).astype(int)

    def __getitem__(self, key):
        m = self.shape[0]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (m if key < 0 else 0)
            return self._take(np.array([i]))[0]
        if isinstance(key, slice):
            a, b, step = key.indices(m)
            if step != 1:
                return self._take(np.arange(a, b, step))
            off = self._offsets()
            parts = []
            for p, lo, hi in zip(self.parts, off[:-1], off[1:], strict=True):
                s, e = max(a, lo) - lo, min(b, hi) - lo
                if e > s:
                    parts.append(p.sub(s, e) if isinstance(p, _OpRows) else p[s:e])
            out = LazyRows(parts) if parts else LazyRows([np.zeros((0, self.q))])
            out.scale = self.scale
            return out
        key = np.asarray(key)
        if key.dtype == bool:
            key = np.flatnonzero(key)
        return self._take(key.astype(np.int64))

    def _take(self, rows: np.ndarray) -> np.ndarray:
        m = self.shape[0]
        rows = np.where(rows < 0, rows + m, rows)
        out = np.zeros((rows.size, self.q))
        off = self._offsets()
        for p, lo, hi in zip(self.parts, off[:-1], off[1:], strict=True):
            pos = np.flatnonzero((rows >= lo) & (rows < hi))
            if pos.size:
                loc = rows[pos] - lo
                out[pos] = (p.take(self.scale, loc) if isinstance(p, _OpRows)
                            else p[loc] * self.scale)
        return out

    def __matmul__(self, v) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        return np.concatenate([
            p.matvec(self.scale, v) if isinstance(p, _OpRows) else p @ (self.scale * v)
            for p in self.parts
        ])

    @property
    def T(self) -> _LazyRowsT:
        return _LazyRowsT(self)

    def __array__(self, dtype=None, copy=None):
        out = self._take(np.arange(self.shape[0]))
        return out if dtype is None else out.astype(dtype)


class _LazyRowsT:
    def __init__(self, rows: LazyRows):
        self.rows = rows

    @property
    def shape(self):
        return self.rows.shape[::-1]

    def __matmul__(self, w) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        R = self.rows
        off = R._offsets()
        out = np.zeros(R.q)
        for p, lo, hi in zip(R.parts, off[:-1], off[1:], strict=True):
            wi = w[lo:hi]
            if not np.any(wi):
                continue
            out += p.rmatvec(R.scale, wi) if isinstance(p, _OpRows) else (p.T @ wi) * R.scale
        return out


def _nrows(p) -> int:
    return p.rows if isinstance(p, _OpRows) else p.shape[0]


def stack_rows(parts: list):
    """``np.vstack`` for operator results, lazy if any part is :class:`LazyRows`."""
    if any(isinstance(p, LazyRows) for p in parts):
        return LazyRows(parts)
    return np.vstack(parts)
