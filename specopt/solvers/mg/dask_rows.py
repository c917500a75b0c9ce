r"""Row data that live in Dask arrays: the data side of matrix generation beyond one machine.

The matrix-generation solver touches the constraint data only through a row operator
``X -> (<A_r, X>)_r``. Here every ``A_r`` is a signed sum of rank-one terms over row-aligned
Dask arrays ``V_j`` (shape (m, n), chunked by rows)::

    A_r = sum_j s_j[r] v_{j,r} v_{j,r}^T          (PSDBoost: s = (+1, -1), V = (P, Q))

and each full-data pass is a map over row blocks followed by a sum (``n x n`` or ``n x k``
matrices), a per-block reduction (``k``-vectors) or a selection of a few rows; the client only
receives those small results, block by block (no task returns an array with ``m`` rows unless
one block holds all rows). Passes:

* margins at the current iterate ``X = F F^T``: ``(sum_j s_j ||F^T v_{j,r}||^2)_r``
  (:meth:`DaskRowOperator.quad` followed by ``@``),
* the master's coefficients ``p_a^T A_r p_b`` for the rows in the working set only
  (:meth:`DaskRowOperator.quad_pairs` followed by ``[rows]``),
* the pricing matrix ``sum_r w_r A_r`` over the rows with ``w_r != 0`` (:meth:`adjoint_dense`,
  :meth:`adjoint_matvec`),
* the final violation check (:func:`row_quad_values`, used by ``row_quad_forms(V, X).value``),
* for the 1-slack cut master (:mod:`specopt.solvers.mg.cuts`): a cut's ``n x n`` matrix and the
  band rows in one pass (:meth:`DaskRowOperator.adjoint_take`),
* round 1 of the row master: the top-``k`` most violated rows (:meth:`top_violated`, a top-``k``
  per block merged on the client).

Rows from index triples (:func:`triplet_rows`) are handled on the triples directly: a product
with a small ``n x k`` matrix gathers rows of ``points @ U`` (``k`` numbers per row instead of
``D``), and a row subset gathers only those rows.

Every pass runs through ``dask.compute`` and therefore on the user's active scheduler: the
``dask.distributed`` Client if one exists, else Dask's local threads. ``dask`` is imported
lazily; nothing else in specopt needs it. Per-row *scalars* (the margins, the master's duals and
LP variables) are still held on the client: 8 bytes per row, against ``8 n`` bytes per row of
``V`` that never leave the cluster.

:func:`triplet_rows` forms PSDBoost's difference rows ``a_i - a_k`` and ``a_i - a_j`` lazily from
index triples (12 bytes per triplet) into a data matrix, one block at a time on the workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ._lazy_rows import LazyRows, _OpRows
from ._operators import FactoredOperator, _pairs

__all__ = [
    "DaskRowOperator",
    "LazyRows",
    "initial_working_set",
    "is_dask_array",
    "is_dask_backed",
    "lazy_row_quad_values",
    "row_quad_values",
    "tree_sum",
    "triplet_rows",
]

#: fan-in of the tree sums run on the cluster
_FAN_IN = 8


def is_dask_array(x: Any) -> bool:
    """True for a ``dask.array.Array`` (checked without importing dask)."""
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks") and hasattr(
        x, "to_delayed"
    )


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - only without the extra
        raise ImportError(
            "Dask-backed data need the optional extra: pip install 'specopt[dask]'"
        ) from exc
    return dask, da


# --------------------------------------------------------------------------------------------
# Block functions (module level: pickled by reference, run on the workers)
# --------------------------------------------------------------------------------------------
def _sign(s, idx=None):
    if np.isscalar(s) or np.ndim(s) == 0:
        return float(s)
    return s if idx is None else s[idx]


class _TripBlock:
    """One block of difference rows ``data[T[:, a]] - data[T[:, b]]`` given by its index triples
    (built inside a task): products with a small matrix gather rows of ``data @ arg`` instead of
    forming the ``(rows, D)`` block; a row subset gathers only those rows."""

    def __init__(self, T, data, a: int, b: int):
        self.T, self.data, self.a, self.b = np.asarray(T), data, a, b

    def matmul(self, arg: np.ndarray) -> np.ndarray:
        Y = _points_times(self.data, arg)
        return Y[self.T[:, self.a]] - Y[self.T[:, self.b]]

    def __getitem__(self, idx) -> np.ndarray:
        Ti = self.T[idx]
        return (np.asarray(self.data[Ti[:, self.a]], dtype=float)
                - np.asarray(self.data[Ti[:, self.b]], dtype=float))


#: the last ``data @ arg`` of this process (a worker runs a pass's blocks one after the other
#: with the same ``arg``: ``N x D x k`` flops once per pass and worker instead of per block)
_LAST_PRODUCT: list = []


def _points_times(data, arg: np.ndarray) -> np.ndarray:
    """``data @ arg``, reused while ``data`` (the same object) and ``arg`` (the same values)
    repeat."""
    arg = np.asarray(arg, dtype=float)
    key = arg.tobytes()
    last = _LAST_PRODUCT[0] if _LAST_PRODUCT else None
    if last is not None and last[0] is data and last[1] == key and last[2] == arg.shape:
        return last[3]
    Y = np.asarray(data, dtype=float) @ arg
    _LAST_PRODUCT[:] = [(data, key, arg.shape, Y)]
    return Y


def _V(v):
    """A block argument: an array, or ``("trip", T, data, a, b)`` for a :class:`_TripBlock`."""
    if isinstance(v, tuple) and v and isinstance(v[0], str) and v[0] == "trip":
        return _TripBlock(*v[1:])
    return v


NONFINITE = ("the Dask data of row_quad_forms (V, or the points X its rows are built from) "
             "contain NaN or inf (found in a pass over the data; check e.g. "
             "da.isfinite(V).all().compute())")


def _finite(out: np.ndarray) -> np.ndarray:
    """``out`` (a block's result, computed from all of the block's values: NaN / inf in the
    data carry into it), or ValueError: the cheap finite check fused into every pass."""
    if not np.isfinite(out).all():
        raise ValueError(NONFINITE)
    return out


def _rows_eval(kind: str, arg: np.ndarray, signs: tuple, Vs: tuple, idx=None) -> np.ndarray:
    """Rows of ``quad`` (``kind="quad"``: ``sum_j s_j (V_j U)^2``) or ``quad_pairs``
    (``kind="pairs"``: ``sum_j s_j (V_j P)_a (V_j P)_b`` over the pairs ``a <= b``)."""
    out = None
    if kind == "pairs":
        I, J = _pairs(arg.shape[1])
    for s, V in zip(signs, Vs, strict=True):
        V = _V(V)
        if isinstance(V, _TripBlock) and idx is None:
            B = V.matmul(arg)
        else:
            B = np.asarray(V if idx is None else V[idx], dtype=float) @ arg
        term = B * B if kind == "quad" else B[:, I] * B[:, J]
        sj = _sign(s, idx)
        term = term * (sj if np.isscalar(sj) else sj[:, None])
        out = term if out is None else out + term
    return _finite(out)


def _blk_rows_matvec(kind, arg, scale, vec, nsig, *sv):
    """``(rows of the block) @ vec`` -> (block rows,)."""
    wv = scale * np.asarray(vec, dtype=float)
    Vs = [_V(V) for V in sv[nsig:]]
    if kind == "quad" and all(isinstance(V, _TripBlock) for V in Vs) and np.all(wv >= 0):
        return _finite(_trip_quad(np.asarray(arg, dtype=float) * np.sqrt(wv), sv[:nsig], Vs))
    R = _rows_eval(kind, arg, sv[:nsig], sv[nsig:])
    return R @ wv


def _blk_rows_quad32(arg, vec, nsig, *sv):
    """``sum_k vec_k u_k^T A_r u_k`` per row of the block in single precision (``vec >= 0``):
    half the memory traffic of the gathers and of the result kept on the worker."""
    Vs = [_V(V) for V in sv[nsig:]]
    wv = np.asarray(vec, dtype=float)
    if all(isinstance(V, _TripBlock) for V in Vs) and np.all(wv >= 0):
        return _finite(_trip_quad(np.asarray(arg, dtype=float) * np.sqrt(wv), sv[:nsig], Vs,
                                  np.float32))
    return _blk_rows_matvec("quad", arg, 1.0, vec, nsig, *sv).astype(np.float32)


def _trip_quad(Us: np.ndarray, signs: tuple, Vs: list, dtype=np.float64) -> np.ndarray:
    """``sum_j s_j |(d_a - d_b)^T Us|^2`` per row of index-triple blocks (the activities
    ``<A_r, Us Us^T>``): the rows of ``data @ Us`` gathered once per triple column (difference
    rows sharing a column, as PSDBoost's ``a_i - a_k`` and ``a_i - a_j``, gather it once),
    no ``(rows, k)`` square formed per term."""
    got: dict = {}

    def col(V, c):
        key = (id(V.data), V.T.ctypes.data, c)
        if key not in got:
            got[key] = _points_times(V.data, Us).astype(dtype, copy=False)[V.T[:, c]]
        return got[key]

    out = None
    for s, V in zip(signs, Vs, strict=True):
        B = col(V, V.a) - col(V, V.b)
        term = np.einsum("ij,ij->i", B, B) * s
        out = term if out is None else out + term
    return out


def _blk_rows_rmatvec(kind, arg, scale, idx, w, nsig, *sv):
    """``(rows idx of the block)^T @ w`` -> (q,)."""
    R = _rows_eval(kind, arg, sv[:nsig], sv[nsig:], idx)
    return (R.T @ w) * scale


def _blk_rows_take(kind, arg, scale, idx, nsig, *sv):
    """Rows ``idx`` of the block -> (len(idx), q)."""
    return _rows_eval(kind, arg, sv[:nsig], sv[nsig:], idx) * scale


def _trip_gram(blocks: list, idx, ws: list) -> np.ndarray | None:
    """``sum_j sum_{r in idx} w_{j,r} (d_a - d_b)(d_a - d_b)^T`` for difference rows of index
    triples sharing one point set ``data`` (:class:`_TripBlock` s): ``data_u^T L data_u``, with
    ``L = sum w (e_a - e_b)(e_a - e_b)^T`` (a weighted graph Laplacian over the points ``u``
    the rows touch). ``2 |u| D^2`` flops instead of ``2 |idx| D^2`` per term, and no
    ``(|idx|, D)`` gather: at ``|S| = 1e7``, ``N = 1e5`` a full cut's pass is ~10x cheaper.
    None when the rows touch more points than there are rows in all terms (direct is cheaper)."""
    ab = [(V.T[idx, V.a], V.T[idx, V.b]) for V in blocks]
    allp = np.concatenate([x for pair in ab for x in pair])
    nd = blocks[0].data.shape[0]
    # the points touched: a presence table over the point indices (no sort)
    seen = np.zeros(nd, dtype=bool)
    seen[allp] = True
    u = np.flatnonzero(seen)
    if u.size > sum(a.size for a, _ in ab):
        return None
    loc = np.zeros(nd, dtype=np.int64)
    loc[u] = np.arange(u.size)
    # L = diag(deg) - (W + W^T), W = sum w e_a e_b^T (one entry per row and term): the sparse
    # product only with W, half the entries of L
    deg = np.zeros(u.size)
    rows, cols, vals = [], [], []
    for (a, b), w in zip(ab, ws, strict=True):
        ia, ib = loc[a], loc[b]
        w = np.broadcast_to(np.asarray(w, dtype=float), (a.size,))
        deg += np.bincount(ia, w, u.size) + np.bincount(ib, w, u.size)
        rows.append(ia)
        cols.append(ib)
        vals.append(w)
    W = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(u.size, u.size))
    Du = np.asarray(blocks[0].data[u], dtype=float)
    E = Du.T @ (W @ Du)
    return (Du * deg[:, None]).T @ Du - E - E.T


def _blk_adjoint(idx, w, X, nsig, *sv):
    """``sum_{r in idx} w_r A_r`` (X None: dense (n, n)) or that matrix times X (n, k).
    Difference rows of index triples over one point set go through :func:`_trip_gram` when
    the rows touch fewer points than they are."""
    out = None
    trips = [(s, _V(V)) for s, V in zip(sv[:nsig], sv[nsig:], strict=True)]
    grp = [(s, V) for s, V in trips if isinstance(V, _TripBlock) and V.data is trips[0][1].data
           ] if X is None and isinstance(trips[0][1], _TripBlock) else []
    if grp:
        out = _trip_gram([V for _, V in grp], idx,
                         [np.asarray(w * _sign(s, idx), dtype=float) for s, _ in grp])
        if out is not None:
            trips = [(s, V) for s, V in trips if not any(V is g for _, g in grp)]
    for s, V in trips:
        Vn = np.asarray(V[idx], dtype=float)
        sw = np.broadcast_to(np.asarray(w * _sign(s, idx), dtype=float), (len(Vn),))
        if X is None:
            term = Vn.T @ (sw[:, None] * Vn)
        else:
            Y = Vn @ X
            term = Vn.T @ (sw.reshape(-1, *([1] * (Y.ndim - 1))) * Y)
        out = term if out is None else out + term
    return _finite(out)


def _blk_take_terms(idx, nsig, *sv):
    """Rows ``idx`` of every term of the block: ([signs], [V rows])."""
    return ([_sign(s, idx) for s in sv[:nsig]],
            [np.asarray(_V(V)[idx], dtype=float) for V in sv[nsig:]])


def _blk_adjoint_take(idx, w, take, nsig, *sv):
    """``(sum_{r in idx} w_r A_r`` (n, n), rows ``take`` of every term) from one block."""
    H = _blk_adjoint(idx, w, None, nsig, *sv) if isinstance(idx, slice) or idx.size else None
    return H, _blk_take_terms(take, nsig, *sv) if take.size else None


def _blk_topk(U, theta, lo, hi, k, nsig, *sv):
    """The ``k`` rows of the block with the largest ``max(lo - a_r, a_r - hi)``, ``a_r =
    sum_j theta_j u_j^T A_r u_j``: (local indices, scores)."""
    act = _rows_eval("quad", U, sv[:nsig], sv[nsig:]) @ theta
    with np.errstate(invalid="ignore"):
        score = np.fmax(lo - act, act - hi)
    score = np.where(np.isnan(score), -np.inf, score)
    if k < score.size:
        idx = np.argpartition(-score, k - 1)[:k]
    else:
        idx = np.arange(score.size)
    return idx, score[idx]


def _blk_quad_values(V, X):
    V = np.asarray(V, dtype=float)
    return _finite(np.einsum("ri,ri->r", V @ X, V))


def _tree_add(*parts):
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def _gather_diff(T, data, a: int, b: int, dtype):
    """Rows ``data[T[:, a]] - data[T[:, b]]`` of one block of index triples."""
    T = np.asarray(T)
    return (np.asarray(data[T[:, a]], dtype=dtype) - np.asarray(data[T[:, b]], dtype=dtype))


# --------------------------------------------------------------------------------------------
# Helpers on the client
# --------------------------------------------------------------------------------------------
def tree_sum(tasks: list):
    dask, _ = _dask()
    add = dask.delayed(_tree_add, pure=True)
    while len(tasks) > 1:
        tasks = [add(*tasks[i: i + _FAN_IN]) if len(tasks[i: i + _FAN_IN]) > 1 else tasks[i]
                 for i in range(0, len(tasks), _FAN_IN)]
    return tasks[0]


def lazy_row_quad_values(V, X: np.ndarray):
    """``(v_r^T X v_r)_r`` for a Dask array ``V`` (m, n) as a lazy array chunked like ``V``'s
    rows (one task per row block; nothing computed)."""
    X = np.asarray(X, dtype=float)
    return V.rechunk({1: -1}).map_blocks(_blk_quad_values, X, drop_axis=1, dtype=float)


def row_quad_values(V, X: np.ndarray) -> np.ndarray:
    """``(v_r^T X v_r)_r`` for a Dask array ``V`` (m, n): one pass, block results gathered."""
    return np.asarray(lazy_row_quad_values(V, X).compute())


def triplet_rows(data, triplets, block_rows: int | None = None, dtype=np.float64) -> tuple:
    """PSDBoost's difference rows from index triples, as lazy Dask arrays ``(P, Q)``.

    For triplets ``(i, j, k)`` ("a_i is closer to a_j than to a_k")::

        P_r = a_i - a_k,    Q_r = a_i - a_j          (rows of ``data``)

    ``data``: numpy array, zarr array or Dask array (N, D) (the points; materialized once on the
    cluster as a single block, so N x D must fit one worker); ``triplets``: (m, 3) integer numpy
    or Dask array. Only the triples (12 bytes each as int32) are stored; the rows are formed per
    block when a pass needs them. ``block_rows`` rechunks the triples (default: their own chunks,
    or 100 000 rows for a numpy array).
    """
    dask, da = _dask()
    if is_dask_array(triplets):
        T = triplets
        if block_rows:
            T = T.rechunk((block_rows, -1))
    else:
        T = np.asarray(triplets)
        T = da.from_array(T, chunks=(block_rows or 100_000, -1))
    if T.ndim != 2 or T.shape[1] != 3:
        raise ValueError(f"triplets must be an (m, 3) integer array, got shape {T.shape}")
    T = T.rechunk({1: -1})
    if is_dask_array(data):
        Dd = data
    else:
        Dd = da.from_array(data, chunks=data.shape)
    if Dd.ndim != 2:
        raise ValueError(f"data must be a 2-D array (N, D), got shape {Dd.shape}")
    Dd = Dd.rechunk(Dd.shape)  # one block: every gather task needs all points
    T, Dd = dask.persist(T, Dd)  # on the workers once; every pass reuses them
    data_key = Dd.to_delayed().ravel()[0]
    n = Dd.shape[1]
    out = []
    for a, b in ((0, 2), (0, 1)):
        g = dask.delayed(_gather_diff, pure=True)
        blocks = [
            da.from_delayed(g(tb, data_key, a, b, dtype), shape=(rows, n), dtype=dtype)
            for tb, rows in zip(T.to_delayed().ravel(), T.chunks[0], strict=True)
        ]
        arr = da.concatenate(blocks, axis=0)
        arr._specopt_keepalive = (T, Dd)  # the persisted triples and points live as long as V
        # the row operator works on the triples directly (see _TripBlock)
        arr._specopt_trip = (list(T.to_delayed().ravel()), data_key, a, b, T.chunks[0])
        out.append(arr)
    return out[0], out[1]


# --------------------------------------------------------------------------------------------
# The row operator
# --------------------------------------------------------------------------------------------
class DaskRowOperator:
    """``A_r = sum_j s_j[r] v_{j,r} v_{j,r}^T`` over row-aligned Dask arrays (module docstring).

    ``terms``: list of ``(s_j, V_j)`` with ``s_j`` a scalar or an (m,) numpy vector and ``V_j``
    an (m, n) Dask (or numpy) array; all ``V_j`` are rechunked to the row blocks of the first
    Dask one. Implements the solver's ``SymOperator`` interface; ``quad`` and ``quad_pairs``
    return :class:`LazyRows` (nothing is computed until the solver contracts or selects rows).
    """

    def __init__(self, terms: list[tuple[Any, Any]]):
        dask, da = _dask()
        if not terms:
            raise ValueError("DaskRowOperator needs at least one term")
        ref = next((V for _, V in terms if is_dask_array(V)), None)
        if ref is None:
            raise ValueError("DaskRowOperator needs at least one Dask array")
        m, n = ref.shape
        if np.isnan(m):
            raise ValueError("the Dask array V needs known chunk sizes (call compute_chunk_sizes)")
        chunks = ref.rechunk({1: -1}).chunks[0]
        self.m, self.n = int(m), int(n)
        self.bounds = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
        self.nsig = len(terms)
        self._signs: list = []
        blocks = []
        for s, V in terms:
            if V.ndim != 2 or V.shape != (self.m, self.n):
                raise ValueError(
                    f"all Dask row terms must have shape ({self.m}, {self.n}), got {V.shape}"
                )
            trip = getattr(V, "_specopt_trip", None)
            if trip is not None and tuple(trip[4]) == tuple(chunks):
                # difference rows from index triples: blocks are (triples, points) references
                tb, data_key, a, b, _ = trip
                blocks.append([("trip", t, data_key, a, b) for t in tb])
            else:
                Vd = V if is_dask_array(V) else da.from_array(np.asarray(V, float), chunks=-1)
                Vd = Vd.rechunk((chunks, -1))
                blocks.append(list(Vd.to_delayed().ravel()))
            s = np.asarray(s, dtype=float)
            if s.ndim and s.size != self.m:
                raise ValueError(f"row signs must have {self.m} entries, got {s.size}")
            if s.ndim and np.all(s == s.flat[0]):
                s = s.flat[0]
            self._signs.append(float(s) if np.ndim(s) == 0 else s)
        self._blocks = [tuple(b[i] for b in blocks) for i in range(len(chunks))]
        self._dask = dask

    @property
    def n_blocks(self) -> int:
        return len(self._blocks)

    def _block_signs(self, b: int) -> tuple:
        lo, hi = self.bounds[b], self.bounds[b + 1]
        return tuple(s if np.ndim(s) == 0 else s[lo:hi] for s in self._signs)

    def _call(self, fn, b: int, *args):
        return self._dask.delayed(fn, pure=True)(
            *args, self.nsig, *self._block_signs(b), *self._blocks[b]
        )

    def _split(self, w: np.ndarray, compress: bool = False):
        """Per block: (b, local indices, values) of the nonzero weights; with ``compress`` a
        block whose rows are all selected gets ``slice(None)`` and equal values one scalar (the
        graph then stays small when every row has a weight, e.g. the cut of all rows)."""
        w = np.asarray(w, dtype=float).ravel()
        if w.size != self.m:
            raise ValueError(f"weights must have {self.m} entries, got {w.size}")
        nz = np.flatnonzero(w)
        blk = np.searchsorted(self.bounds, nz, side="right") - 1
        out = []
        for b in np.unique(blk):
            sel = nz[blk == b]
            idx, vals = sel - self.bounds[b], w[sel]
            if compress:
                if sel.size == self.bounds[b + 1] - self.bounds[b]:
                    idx = slice(None)
                if np.all(vals == vals[0]):
                    vals = float(vals[0])
            out.append((int(b), idx, vals))
        return out

    # ---- the SymOperator interface -------------------------------------------------------
    def quad(self, U: np.ndarray) -> LazyRows:
        """``out[r, k] = u_k^T A_r u_k`` (lazy, shape (m, k))."""
        U = np.asarray(U, dtype=float).reshape(self.n, -1)
        return LazyRows([_OpRows(self, "quad", U, U.shape[1])])

    def quad_pairs(self, P: np.ndarray) -> LazyRows:
        """``out[r, l] = p_a^T A_r p_b`` for the pairs ``a <= b`` (lazy, (m, k(k+1)/2))."""
        P = np.asarray(P, dtype=float).reshape(self.n, -1)
        k = P.shape[1]
        return LazyRows([_OpRows(self, "pairs", P, k * (k + 1) // 2)])

    def adjoint_dense(self, w: np.ndarray) -> np.ndarray:
        """``sum_r w_r A_r`` (n, n), over the rows with ``w_r != 0`` only."""
        tasks = [self._call(_blk_adjoint, b, idx, wv, None)
                 for b, idx, wv in self._split(w, compress=True)]
        if not tasks:
            return np.zeros((self.n, self.n))
        (H,) = self._dask.compute(tree_sum(tasks))
        return 0.5 * (H + H.T)

    def adjoint_matvec(self, w: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``(sum_r w_r A_r) @ X`` over the rows with ``w_r != 0`` only."""
        X = np.asarray(X, dtype=float)
        tasks = [self._call(_blk_adjoint, b, idx, wv, X)
                 for b, idx, wv in self._split(w, compress=True)]
        if not tasks:
            return np.zeros((self.n,) + X.shape[1:])
        (Y,) = self._dask.compute(tree_sum(tasks))
        return Y

    def take_operator(self, rows: np.ndarray):
        """The rows ``rows`` (sorted, unique) as an in-memory ``FactoredOperator`` (one pass
        returning only those rows of every ``V_j``)."""
        rows = np.asarray(rows, dtype=np.int64)
        k = rows.size
        blk = np.searchsorted(self.bounds, rows, side="right") - 1
        tasks = []
        for b in np.unique(blk):
            sel = rows[blk == b] - self.bounds[b]
            tasks.append(self._call(_blk_take_terms, int(b), sel))
        parts = self._dask.compute(*tasks) if tasks else []
        return self._taken_operator(list(parts), k)

    def adjoint_take(self, w: np.ndarray, rows: np.ndarray):
        """``(adjoint_dense(w), take_operator(rows))`` in one pass over the blocks involved."""
        rows = np.asarray(rows, dtype=np.int64)
        per = {b: [np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)]
               for b in range(self.n_blocks)}
        for b, idx, wv in self._split(w, compress=True):
            per[b][0], per[b][1] = idx, wv
        blk = np.searchsorted(self.bounds, rows, side="right") - 1
        for b in np.unique(blk):
            per[int(b)][2] = rows[blk == b] - self.bounds[b]
        bs = [b for b, (idx, _, tk) in per.items()
              if isinstance(idx, slice) or idx.size or tk.size]
        parts = self._dask.compute(*[self._call(_blk_adjoint_take, b, *per[b]) for b in bs])
        H = sum((h for h, _ in parts if h is not None), np.zeros((self.n, self.n)))
        taken = [tk for _, tk in parts if tk is not None]
        return 0.5 * (H + H.T), self._taken_operator(taken, rows.size)

    def _taken_operator(self, taken: list, k: int) -> FactoredOperator:
        """The ``k`` rows taken from the blocks (``(signs, V rows)`` per block, in row order) as
        an in-memory ``FactoredOperator``."""
        Vs, Ss = [], []
        for j in range(self.nsig):
            Vs.append(np.vstack([p[1][j] for p in taken]) if taken else np.zeros((0, self.n)))
            Ss.append(np.concatenate([np.broadcast_to(p[0][j], len(p[1][j])) for p in taken])
                      if taken else np.zeros(0))
        M = sp.hstack([sp.diags_array(s, shape=(k, k)) for s in Ss], format="csr")
        return FactoredOperator(np.vstack(Vs), M)

    def top_violated(self, U: np.ndarray, theta: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     k: int) -> np.ndarray:
        """The ``k`` rows with the largest ``max(lo_r - a_r, a_r - hi_r)`` at ``X = U diag(theta)
        U^T`` (most violated first, then least slack): a top-``k`` per block on the cluster and a
        merge of those on the client (never the ``m`` activities)."""
        U = np.asarray(U, dtype=float)
        tasks = []
        for b in range(self.n_blocks):
            lo_b, hi_b = lo[self.bounds[b]: self.bounds[b + 1]], hi[self.bounds[b]:
                                                                   self.bounds[b + 1]]
            tasks.append(self._call(_blk_topk, b, U, theta, lo_b, hi_b, k))
        parts = self._dask.compute(*tasks)
        idx = np.concatenate([i + self.bounds[b] for b, (i, _) in enumerate(parts)])
        sc = np.concatenate([s for _, s in parts])
        keep = np.argsort(-sc, kind="stable")[:k]
        return np.sort(idx[keep])

    # ---- passes behind LazyRows ----------------------------------------------------------
    def rows_matvec(self, kind, arg, scale, vec, lo, hi) -> np.ndarray:
        # the master asks for the same margins several times per round: remember the last two
        key = (kind, lo, hi, *(np.asarray(a, dtype=float).tobytes() for a in (arg, scale, vec)))
        memo = self.__dict__.setdefault("_memo", {})
        if key in memo:
            return memo[key].copy()
        out = self._matvec_pass(kind, arg, scale, vec, lo, hi)
        if len(memo) >= 2:  # (m floats each: the client's memory per row)
            memo.pop(next(iter(memo)))
        memo[key] = out
        return out.copy()

    def _matvec_pass(self, kind, arg, scale, vec, lo, hi) -> np.ndarray:
        bs = [b for b in range(self.n_blocks) if self.bounds[b] < hi and self.bounds[b + 1] > lo]
        tasks = [self._call(_blk_rows_matvec, b, kind, arg, scale, vec) for b in bs]
        parts = self._dask.compute(*tasks)
        full = np.concatenate(parts) if parts else np.zeros(0)
        return full[lo - self.bounds[bs[0]]: hi - self.bounds[bs[0]]] if bs else full

    def rows_rmatvec(self, kind, arg, scale, w, q) -> np.ndarray:
        tasks = [self._call(_blk_rows_rmatvec, b, kind, arg, scale, idx, wv)
                 for b, idx, wv in self._split(w)]
        if not tasks:
            return np.zeros(q)
        (y,) = self._dask.compute(tree_sum(tasks))
        return y

    def rows_take(self, kind, arg, scale, rows, q) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((rows.size, q))
        if rows.size == 0:
            return out
        blk = np.searchsorted(self.bounds, rows, side="right") - 1
        tasks, where = [], []
        for b in np.unique(blk):
            pos = np.flatnonzero(blk == b)
            tasks.append(self._call(_blk_rows_take, int(b), kind, arg, scale,
                                    rows[pos] - self.bounds[b]))
            where.append(pos)
        for pos, part in zip(where, self._dask.compute(*tasks), strict=True):
            out[pos] = part
        return out


def is_dask_backed(op) -> bool:
    """True if the operator (or a part of it) keeps its rows in Dask arrays."""
    return isinstance(op, DaskRowOperator) or any(is_dask_backed(o) for o in getattr(op, "ops", []))


def initial_working_set(A, P: np.ndarray, t: float, G, z0: np.ndarray, lb: np.ndarray,
                        ub: np.ndarray, work: np.ndarray, k: int = 1000) -> np.ndarray:
    """Round 1's row working set of the PSD-block master for Dask-backed rows: the ``k`` rows of
    each Dask part most violated at ``X = (t / p) P P^T``, ``z = z0`` (top-``k`` on the cluster),
    plus every in-memory row. Unchanged ``work`` when nothing is Dask-backed. The rows left out
    join the master as soon as they are violated (``_master_on_rows``)."""
    parts = A.ops if hasattr(A, "ops") and hasattr(A, "_cuts") else [A]
    cuts = A._cuts if len(parts) > 1 else np.array([0, A.m])
    if not any(isinstance(o, DaskRowOperator) for o in parts):
        return work
    off = np.asarray(G @ z0, dtype=float)
    theta = np.full(P.shape[1], t / max(P.shape[1], 1))
    out = np.zeros(A.m, dtype=bool)
    for o, a, b in zip(parts, cuts[:-1], cuts[1:], strict=True):
        if isinstance(o, DaskRowOperator) and o.m > k:
            rows = o.top_violated(P, theta, lb[a:b] - off[a:b], ub[a:b] - off[a:b], k)
            out[a + rows] = True
        else:
            out[a:b] = True
    return out
