"""The learners' parameter validator (specopt.learn._base.check_params): specopt's own, with
scikit-learn's vocabulary and message."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import pytest

pytest.importorskip("sklearn")

import specopt.learn as learn  # noqa: E402
from specopt.learn._base import (  # noqa: E402
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    check_params,
)

#: Values of every kind a parameter may be given: numbers at and past the ends, NaN / inf,
#: numpy scalars, bools, strings of the tables' options, containers, generators, callables.
VALUES = [
    None, 0, 1, 2, -1, 0.0, 0.5, 1.0, 3.7, -2.5, np.nan, np.inf, -np.inf, True, False,
    np.bool_(True), np.int64(3), np.float32(2.5), "a", "rbf", "linear", "svd", "identity",
    "matrix", "auto", "knn", "edges", "affinity", "global", "CLARABEL", {}, {"a": 1}, [1, 2],
    (5.0, 95.0), np.eye(2), np.random.RandomState(0), np.random.default_rng(0), len,
    lambda a, b: a, 2**32, 2**32 - 1, object(),
]


def _accepts(cls, name, value) -> bool:
    est = cls()
    est.set_params(**{name: value})
    try:
        check_params(est)
    except InvalidParameterError:
        return False
    return True


@pytest.mark.parametrize("name", learn.__all__)
def test_tables_accept_what_scikit_learns_validator_accepts(name):
    """Every entry of every table, on every value above: accepted by specopt's validator exactly
    when scikit-learn's (private) one accepts it, read as its own constraint objects."""
    pv = pytest.importorskip("sklearn.utils._param_validation")

    def theirs(c):
        if isinstance(c, Interval):
            return pv.Interval(c.type, c.left, c.right, closed=c.closed)
        if isinstance(c, StrOptions):
            return pv.StrOptions(set(c.options))
        if isinstance(c, HasMethods):
            return pv.HasMethods(list(c.methods))
        return c

    cls = getattr(learn, name)
    for param, constraints in cls._parameter_constraints.items():
        table = {param: [theirs(c) for c in constraints]}
        for value in VALUES:
            try:
                pv.validate_parameter_constraints(table, {param: value}, name)
                expected = True
            except pv.InvalidParameterError:
                expected = False
            assert _accepts(cls, param, value) == expected, (param, value)


def test_message_names_parameter_rule_and_value():
    with pytest.raises(InvalidParameterError) as info:
        learn.PSDBoostMetric(C=0.5).fit(np.eye(3), [0, 1, 1])
    assert str(info.value) == ("The 'C' parameter of PSDBoostMetric must be a float in the range "
                               "[1.0, inf). Got 0.5 instead.")
    with pytest.raises(InvalidParameterError) as info:
        check_params(learn.KernelITML(kernel="cosine"))
    assert str(info.value) == ("The 'kernel' parameter of KernelITML must be a str among "
                               "{'linear', 'poly', 'rbf'} or a callable. Got 'cosine' instead.")
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_interval_ends():
    pos = Interval(Real, 0, None, closed="neither")
    assert pos.accepts(1e300) and pos.accepts(np.float32(1))
    assert not any(pos.accepts(v) for v in (0, 0.0, -1e-300, math.nan, math.inf, "1", None))
    hard = Interval(Real, 0, math.inf, closed="right")  # ITML's gamma: inf = hard constraints
    assert hard.accepts(math.inf) and not hard.accepts(math.nan) and not hard.accepts(0.0)
    count = Interval(Integral, 1, None, closed="left")
    assert count.accepts(1) and count.accepts(np.int64(7))
    assert not count.accepts(2.0) and not count.accepts(0)
    assert str(count) == "an int in the range [1, inf)"
    assert str(hard) == "a float in the range (0.0, inf]"
