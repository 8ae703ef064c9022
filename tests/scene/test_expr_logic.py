"""``and``, ``or`` and ``not`` in the safe expression language: Python's values, element by element."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mbsim.scene.expr import ExpressionError, compile_expression

NAMES = frozenset({"a", "b", "c"})


@pytest.mark.parametrize("text", ["a and b", "a or b", "not a", "a and b or c", "a or b and not c", "a and b and c"])
def test_logic_gives_pythons_values(text: str) -> None:
    expr = compile_expression(text, variables=NAMES)
    for a, b, c in itertools.product([0.0, 2.0, -1.5], repeat=3):
        expected = eval(text, {}, {"a": a, "b": b, "c": c})  # the reference is Python itself, on numbers only
        assert float(expr({"a": a, "b": b, "c": c})) == float(expected), (a, b, c)


def test_logic_over_comparisons_and_arrays() -> None:
    expr = compile_expression("x > 0 and x < 1 or x == 5", variables=frozenset({"x"}))
    x = np.array([-1.0, 0.5, 2.0, 5.0])
    np.testing.assert_array_equal(np.asarray(expr({"x": x}), dtype=bool), [False, True, False, True])


def test_logic_folds_with_parameters_and_has_zero_derivative_of_its_tests() -> None:
    assert compile_expression("L > 1 and not L > 3", {"L": 2.0}).is_constant
    drive = compile_expression("where(t > 1 and t < 2, t**2, 0)", variables=frozenset({"t"}))
    assert float(drive.derivative()({"t": 1.5})) == pytest.approx(3.0)
    assert float(drive.derivative()({"t": 2.5})) == 0.0


def test_long_chains_stay_linear() -> None:
    text = " and ".join(f"a > {k}" for k in range(60))
    expr = compile_expression(text, variables=frozenset({"a"}))
    assert bool(expr({"a": 100.0})) and not bool(expr({"a": 30.0}))


@pytest.mark.parametrize(("text", "fragment"), [("a and b.c", "attribute"), ("a or q", "unknown name 'q'")])
def test_logic_keeps_the_whitelist(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError, match=fragment):
        compile_expression(text, variables=NAMES)


@pytest.mark.parametrize(
    ("text", "value"),
    [("-(t > 1)", -1.0), ("(t > 1) - (t > 2)", 1.0), ("sign(t > 1)", 1.0), ("(t > 1) + (t > 1)", 2.0),
     ("2 * (t <= 1) + (t != 1)", 1.0), ("-(t < 1)", -0.0)],
)  # fmt: skip
def test_a_comparison_is_the_number_one_or_zero(text: str, value: float) -> None:
    """As the compiled evaluator computes it: at t = 1.5 every comparison is 1.0 or 0.0, and
    arithmetic on it is arithmetic on numbers (a boolean would refuse the minus, or add as or)."""
    expr = compile_expression(text, variables=frozenset({"t"}))
    got = expr({"t": 1.5})
    assert float(got) == value and np.asarray(got).dtype == np.float64
    arrays = expr({"t": np.array([0.5, 1.5, 2.5])})
    assert np.asarray(arrays).dtype == np.float64
