"""SDPA reading / writing (specopt.io) on files the tests write themselves."""

from __future__ import annotations

import re

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specopt
from specopt.io import SDPAData, parse_sdpa, read_sdpa, write_sdpa, write_sdpa_data

# the README example of the SDPA format (two 2 x 2 blocks), with comments and punctuation
README_EXAMPLE = """\
"A sample problem.
* a second comment line
2 =mdim
2 =nblocks
{2, 2}
10.0 20.0
0 1 1 1 1.0
0 1 2 2 2.0
0 2 1 1 3.0
0 2 2 2 4.0
1 1 1 1 1.0
1 1 2 2 1.0
2 1 2 2 1.0
2 2 1 1 5.0
2 2 1 2 2.0
2 2 2 2 6.0
"""


def _write(tmp_path, text: str, name: str = "p.dat-s"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _dense(data: SDPAData, b: int, k: int) -> np.ndarray:
    """The dense block ``b`` of ``F_k``."""
    n = abs(data.block_sizes[b])
    mat, i, j, v = data.entries[b]
    F = np.zeros((n, n))
    s = mat == k
    F[i[s], j[s]] = v[s]
    F[j[s], i[s]] = v[s]
    return F


def _primal_value(F: list[list[np.ndarray]], c: np.ndarray) -> float:
    """SDPA's primal (P): min c^T x s.t. sum_i x_i F_i - F_0 PSD, blockwise, solved directly."""
    x = cp.Variable(len(c))
    cons = [sum(x[i] * Fb[i + 1] for i in range(len(c))) - Fb[0] >> 0 for Fb in F]
    prob = cp.Problem(cp.Minimize(c @ x), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.value


def test_readme_example_comments_and_punctuation(tmp_path):
    prob = read_sdpa(_write(tmp_path, README_EXAMPLE))
    Ys = prob.variables()
    assert sorted(v.name() for v in Ys) == ["Y1", "Y2"]
    assert all(v.shape == (2, 2) and v.attributes["symmetric"] for v in Ys)
    assert isinstance(prob.objective, cp.Maximize)
    prob.solve(solver=cp.CLARABEL)
    # (D)'s value equals SDPA's primal (P) (no gap here): the sign convention of the docstring
    F0 = [np.diag([1.0, 2.0]), np.diag([3.0, 4.0])]
    F1 = [np.diag([1.0, 1.0]), np.zeros((2, 2))]
    F2 = [np.diag([0.0, 1.0]), np.array([[5.0, 2.0], [2.0, 6.0]])]
    blocks = [[F0[b], F1[b], F2[b]] for b in range(2)]
    ref = _primal_value(blocks, np.array([10.0, 20.0]))
    assert prob.value == pytest.approx(ref, rel=1e-6)


def test_constraint_rows_are_trace_inner_products(tmp_path):
    data = parse_sdpa(_write(tmp_path, README_EXAMPLE))
    prob = read_sdpa(tmp_path / "p.dat-s")
    rng = np.random.default_rng(0)
    by_name = {v.name(): v for v in prob.variables()}
    vals = []
    for b in range(2):
        G = rng.standard_normal((2, 2))
        vals.append(G + G.T)
        by_name[f"Y{b + 1}"].value = vals[-1]
    rows = prob.constraints[0]
    lhs = np.asarray(rows.args[0].value).ravel()
    want = [sum(np.sum(_dense(data, b, k) * vals[b]) for b in range(2)) for k in (1, 2)]
    np.testing.assert_allclose(lhs, want, rtol=1e-12)
    obj = sum(np.sum(_dense(data, b, 0) * vals[b]) for b in range(2))
    assert prob.objective.value == pytest.approx(obj, rel=1e-12)


def test_diagonal_block_is_a_nonnegative_vector(tmp_path):
    text = """\
* one 2x2 block and a diagonal block of size 3
1
2
(2, -3)
(1.0)
0 1 1 1 1.0
0 2 2 2 1.0
0 2 3 3 -1.0
1 1 1 1 1.0
1 1 2 2 1.0
1 2 1 1 1.0
1 2 2 2 1.0
1 2 3 3 1.0
"""
    prob = read_sdpa(_write(tmp_path, text))
    y = next(v for v in prob.variables() if v.name() == "Y2")
    assert y.shape == (3,)
    prob.solve(solver=cp.CLARABEL)
    # max Y11 + y2 - y3 s.t. tr(Y) + sum(y) = 1: value 1 (all mass on Y11 or y2)
    assert prob.value == pytest.approx(1.0, abs=1e-6)
    assert np.all(y.value >= -1e-7)


def test_lower_triangle_entries_read_as_upper(tmp_path):
    up = "1\n1\n2\n1.0\n0 1 1 2 3.0\n1 1 1 1 1.0\n1 1 2 2 1.0\n"
    low = up.replace("0 1 1 2 3.0", "0 1 2 1 3.0")
    a = parse_sdpa(_write(tmp_path, up, "a.dat-s"))
    b = parse_sdpa(_write(tmp_path, low, "b.dat-s"))
    np.testing.assert_array_equal(_dense(a, 0, 0), _dense(b, 0, 0))


@pytest.mark.parametrize("text, line, words", [
    ("2\n1\n2\n1.0\n", 4, "expected 2 entries of c"),
    ("1\n1\n2\n1.0\n0 1 1 1\n", 5, "5 fields"),
    ("1\n1\n2\n1.0\n0 1 1 1 x\n", 5, "'x' is not a number"),
    ("1\n1\n2\n1.0\n0 1 1 1 1.0\n2 1 1 1 1.0\n", 6, "out of range"),
    ("1\n1\n2\n1.0\n* note\n0 1 1 3 1.0\n", 6, "outside block 1 of size 2"),
    ("1\n1\n-2\n1.0\n0 1 1 2 1.0\n", 5, "off-diagonal entry"),
    ("1\n1\n2\n1.0\n0 1 1 2 1.0\n0 1 2 1 1.0\n", 6, "given twice"),
    ("1\n1\n2\n1.0\n0 1 1.5 1 1.0\n", 5, "must be integers"),
    ('"only a comment\n1\n1\n', 3, "ends before the four header lines"),
    ("1\nx\n2\n1.0\n", 2, "'x' is not a number"),
    ("1\n1\n0\n1.0\n", 3, "nonzero"),
])
def test_malformed_files_name_the_line(tmp_path, text, line, words):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=rf"line {line}: .*{re.escape(words)}"):
        read_sdpa(path)


def _random_data(draw, n: int, diag: int, m: int) -> SDPAData:
    entries = []
    for size in ([n, -diag] if diag else [n]):
        k = abs(size)
        mats, ii, jj, vv = [], [], [], []
        for mat in range(m + 1):
            for i in range(k):
                for j in range(i, k) if size > 0 else [i]:
                    if draw(st.booleans()):
                        v = draw(st.floats(-1e3, 1e3, allow_nan=False).filter(lambda x: x != 0))
                        mats.append(mat)
                        ii.append(i)
                        jj.append(j)
                        vv.append(v)
        entries.append((np.array(mats, dtype=np.int64), np.array(ii, dtype=np.int64),
                        np.array(jj, dtype=np.int64), np.array(vv, dtype=float)))
    c = np.array([draw(st.floats(-1e3, 1e3, allow_nan=False)) for _ in range(m)])
    return SDPAData(m=m, block_sizes=[n, -diag] if diag else [n], c=c, entries=entries)


@settings(max_examples=25, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(0, 3), st.integers(0, 4))
def test_round_trip_write_read(tmp_path_factory, data, n, diag, m):
    d = _random_data(data.draw, n, diag, m)
    tmp = tmp_path_factory.mktemp("rt")
    write_sdpa_data(d, tmp / "a.dat-s")
    prob = read_sdpa(tmp / "a.dat-s")
    write_sdpa(prob, tmp / "b.dat-s")
    back = parse_sdpa(tmp / "b.dat-s")
    assert back.m == m and back.block_sizes == d.block_sizes
    np.testing.assert_array_equal(back.c, d.c)
    for b in range(len(d.block_sizes)):
        for k in range(m + 1):
            np.testing.assert_array_equal(_dense(back, b, k), _dense(d, b, k))


def test_write_user_model_and_minimize(tmp_path):
    rng = np.random.default_rng(1)
    n = 4
    C = rng.standard_normal((n, n))
    C = C + C.T
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.trace(C @ X)), [cp.diag(X) == 1])
    write_sdpa(prob, tmp_path / "mc.dat-s")
    back = read_sdpa(tmp_path / "mc.dat-s")
    prob.solve(solver=cp.CLARABEL)
    back.solve(solver=cp.CLARABEL)
    assert back.value == pytest.approx(-prob.value, rel=1e-6)  # F0 = -C
    d = parse_sdpa(tmp_path / "mc.dat-s")
    np.testing.assert_allclose(_dense(d, 0, 0), -C, atol=1e-14)


@pytest.mark.parametrize("make, words", [
    (lambda X, Z, y: cp.Problem(cp.Maximize(cp.trace(X) + cp.trace(Z)), [X >> 0, Z >> 0]),
     "one square matrix variable"),
    (lambda X, Z, y: cp.Problem(cp.Maximize(cp.trace(X)), [X >> 0, X[0, 1] <= 1]),
     "is not an equality row"),
    (lambda X, Z, y: cp.Problem(cp.Maximize(cp.trace(X) + 1), [X >> 0, cp.trace(X) == 1]),
     "constant"),
    (lambda X, Z, y: cp.Problem(cp.Maximize(cp.trace(X)), [cp.trace(X) == 1]),
     "no PSD constraint"),
    (lambda X, Z, y: cp.Problem(cp.Maximize(cp.trace(X) + cp.sum(y)),
                                [X >> 0, cp.trace(X) + cp.sum(y) == 1]),
     "must be nonnegative"),
    (lambda X, Z, y: cp.Problem(cp.Maximize(-cp.sum_squares(X)), [X >> 0]),
     "write_sdpa"),
])
def test_write_rejects_other_forms(tmp_path, make, words):
    X = cp.Variable((3, 3), symmetric=True)
    Z = cp.Variable((2, 2), symmetric=True)
    y = cp.Variable(2)
    with pytest.raises(ValueError, match=re.escape(words)):
        write_sdpa(make(X, Z, y), tmp_path / "bad.dat-s")


def test_exported():
    assert specopt.read_sdpa is read_sdpa and specopt.write_sdpa is write_sdpa
