"""Safe expression language of scene files (CONTRACT §1, "Expressions").

An expression is parsed once with :mod:`ast`, every node is checked against a whitelist,
and the tree is turned into a small intermediate form (tuples) that is both compiled to a
closure over numpy functions and differentiated symbolically (drives need the first and
second time derivative of a prescribed coordinate, exactly). Python's ``eval`` is never
used on scene text. :func:`compile_programs` flattens checked expressions into register
"bytecode" for the one compiled interpreter of mbsim.model.expr_kernel.

Grammar: numbers, names (parameters, ``t``, ``pi``, ``e``, and in forces the state
variables of the body), ``+ - * / **``, unary minus, comparisons, ``and`` / ``or`` / ``not``
(Python's values, as ``where``: ``a and b`` is ``where(a, b, a)``), and calls of the functions
in :data:`FUNCTIONS`.
"""

from __future__ import annotations

import ast
import math
import numbers
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mbsim.errors import did_you_mean, shorten

# name -> (numpy implementation, number of arguments; -1 means two or more)
FUNCTIONS: dict[str, tuple[Callable, int]] = {
    "sin": (np.sin, 1),
    "cos": (np.cos, 1),
    "tan": (np.tan, 1),
    "asin": (np.arcsin, 1),
    "acos": (np.arccos, 1),
    "atan": (np.arctan, 1),
    "atan2": (np.arctan2, 2),
    "sinh": (np.sinh, 1),
    "cosh": (np.cosh, 1),
    "tanh": (np.tanh, 1),
    "exp": (np.exp, 1),
    "log": (np.log, 1),
    "sqrt": (np.sqrt, 1),
    "abs": (np.abs, 1),
    "min": (np.minimum, -1),
    "max": (np.maximum, -1),
    "floor": (np.floor, 1),
    "mod": (np.mod, 2),  # a - b floor(a/b): the sign of b, as Python's %; periodic signals
    "ceil": (np.ceil, 1),
    "sign": (np.sign, 1),
    "where": (np.where, 3),
}
CONSTANTS = {"pi": math.pi, "e": math.e}
# nesting limit of the syntax tree and of the intermediate form (chained comparisons, ``and``
# and ``min`` of many operands nest there): the parser and the constant folding recurse
MAX_DEPTH = 100
MAX_LENGTH = 2000  # characters of one expression

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_BIN_IMPL = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "**": np.power,
}


def _as_number(compare: Callable) -> Callable:
    """A comparison whose result is the number 1.0 or 0.0 (not a boolean): ``-(t > 1)`` is -1,
    ``(t > 1) + (t > 1)`` is 2, as in the compiled evaluator (mbsim.model.expr_kernel)."""
    return lambda a, b: compare(a, b) * 1.0


_CMP_IMPL = {
    "<": _as_number(np.less),
    "<=": _as_number(np.less_equal),
    ">": _as_number(np.greater),
    ">=": _as_number(np.greater_equal),
    "==": _as_number(np.equal),
    "!=": _as_number(np.not_equal),
}


class ExpressionError(ValueError):
    """An expression is malformed or uses something outside the language."""


# Intermediate form: ("num", value) | ("var", name) | ("neg", a) | ("bin", op, a, b)
#                  | ("cmp", op, a, b) | ("call", name, (args...))
Node = tuple


def _short(text: str, limit: int = 40) -> str:
    return shorten(text, limit)


def _digits(value: int) -> str:
    """How many decimal digits a whole number has ("about" past Python's conversion limit)."""
    bits = abs(int(value)).bit_length()
    if bits < 14_000:  # str() refuses more than 4300 digits
        return str(len(str(abs(int(value)))))
    return f"about {int(bits * math.log10(2)) + 1}"


def _number(value: int | float, where: str = "") -> float:
    """A number as a float: refused when it is too large for one or not finite (1e999, .nan);
    ``where`` heads the message (``in 'EXPRESSION': ``)."""
    try:
        number = float(value)
    except OverflowError:
        raise ExpressionError(
            f"{where}a number of {_digits(value)} digits, too large for a float (at most about 1.8e308)"
        ) from None
    if not math.isfinite(number):
        raise ExpressionError(f"{where}expected a finite number, got {number}")
    return number


class _Names:
    """The names an expression may use: the parameters and the free variables, looked up in
    place (a scene with many parameters must not copy them for every expression)."""

    def __init__(self, parameters: Mapping[str, float], variables: frozenset[str] | set[str]) -> None:
        self.parameters = parameters
        self.variables = variables

    def __contains__(self, name: str) -> bool:
        return name in self.variables or name in self.parameters

    def listing(self, most: int = 30) -> str:
        every = sorted({*self.variables, *self.parameters, *CONSTANTS})
        more = f", ... ({len(every) - most} more)" if len(every) > most else ""
        return ", ".join(every[:most]) + more if every else "none"


def _to_ir(node: ast.AST, names: _Names, text: str) -> Node:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionError(f"in '{text}': only numbers are allowed, got {_short(repr(node.value))}")
        return ("num", _number(node.value, f"in '{text}': "))
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return ("num", CONSTANTS[node.id])
        if node.id not in names:
            allowed = names.listing()
            raise ExpressionError(f"in '{text}': unknown name '{node.id}' (allowed here: {allowed})")
        return ("var", node.id)
    if isinstance(node, ast.BoolOp):
        # a and b -> where(a, b, a), a or b -> where(a, a, b): Python's values, element by element;
        # folded from the right (a and (b and c)), so the tree grows linearly with the operands
        values = [_to_ir(v, names, text) for v in node.values]
        out = values[-1]
        for v in reversed(values[:-1]):
            out = ("call", "where", (v, out, v) if isinstance(node.op, ast.And) else (v, v, out))
        return out
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return ("call", "where", (_to_ir(node.operand, names, text), ("num", 0.0), ("num", 1.0)))
        if isinstance(node.op, ast.USub):
            return _simplify(("neg", _to_ir(node.operand, names, text)))
        if isinstance(node.op, ast.UAdd):
            return _to_ir(node.operand, names, text)
        raise ExpressionError(f"in '{text}': operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise ExpressionError(f"in '{text}': operator {type(node.op).__name__} is not allowed")
        return _simplify(("bin", op, _to_ir(node.left, names, text), _to_ir(node.right, names, text)))
    if isinstance(node, ast.Compare):
        parts = []
        left = _to_ir(node.left, names, text)
        for op_node, right_node in zip(node.ops, node.comparators, strict=True):
            op = _CMPOPS.get(type(op_node))
            if op is None:
                raise ExpressionError(f"in '{text}': comparison {type(op_node).__name__} is not allowed")
            right = _to_ir(right_node, names, text)
            parts.append(("cmp", op, left, right))
            left = right
        out = parts[0]
        for extra in parts[1:]:  # a < b < c means (a < b) and (b < c)
            out = ("call", "where", (out, extra, ("num", 0.0)))
        return out
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise ExpressionError(
                f"in '{text}': only calls of plain function names are allowed, got a call of '{ast.unparse(node.func)}'"
            )
        fname = node.func.id
        if fname == "distance" and fname not in FUNCTIONS:
            return ("var", _distance_signal(node, names, text))
        if fname not in FUNCTIONS:
            raise ExpressionError(f"in '{text}': unknown function '{fname}' (allowed: {', '.join(sorted(FUNCTIONS))})")
        if node.keywords:
            keys = ", ".join(f"'{k.arg}'" if k.arg else "'**'" for k in node.keywords)
            raise ExpressionError(f"in '{text}': keyword arguments are not allowed, got {keys} in {fname}()")
        _, arity = FUNCTIONS[fname]
        nargs = len(node.args)
        if (arity == -1 and nargs < 2) or (arity >= 0 and nargs != arity):
            want = "at least 2 arguments" if arity == -1 else f"{arity} argument" + ("s" if arity != 1 else "")
            raise ExpressionError(f"in '{text}': {fname}() takes {want}, got {nargs}")
        args = tuple(_to_ir(a, names, text) for a in node.args)
        if fname in ("min", "max") and nargs > 2:  # fold to binary calls
            out = ("call", fname, args[:2])
            for a in args[2:]:
                out = ("call", fname, (out, a))
            return out
        return ("call", fname, args)
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        return ("var", _signal_name(node, names, text))
    raise ExpressionError(f"in '{text}': {type(node).__name__} is not allowed in an expression")


def _signal_name(node: ast.Attribute | ast.Subscript, names: _Names, text: str) -> str:
    """A signal by its dotted name (CONTRACT §8: ``q.JOINT``, ``BODY.vx``), also written
    ``q["JOINT"]`` for a name that is not a Python identifier; checked against ``names``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        dotted = f"{node.value.id}.{node.attr}"
    elif (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        dotted = f"{node.value.id}.{node.slice.value}"
    elif isinstance(node, ast.Attribute):
        raise ExpressionError(f"in '{text}': attribute access ('.{_short(node.attr)}') is not allowed")
    else:
        raise ExpressionError(f"in '{text}': {type(node).__name__} is not allowed in an expression")
    if dotted not in names:
        signals = sorted(v for v in names.variables if "." in v)
        if not signals:
            raise ExpressionError(
                f"in '{text}': attribute access ('{_short(dotted)}') is not allowed here (signals such as "
                "q.JOINT are read by forces, actuators and outputs)"
            )
        hint = did_you_mean(dotted, signals)
        raise ExpressionError(f"in '{text}': unknown signal '{_short(dotted)}'" + (f"; {hint}" if hint else ""))
    return dotted


def _distance_signal(node: ast.Call, names: _Names, text: str) -> str:
    """``distance(BODY1, [x, y, z], BODY2, [x, y, z])``: the distance between two body points
    (body axes; constant coordinates), a signal the namespace registers (its ``distance``)."""
    register = getattr(names.variables, "distance", None)
    if register is None:
        raise ExpressionError(f"in '{text}': distance() is not available here")
    if node.keywords or len(node.args) != 4:
        raise ExpressionError(f"in '{text}': distance() takes 4 arguments: BODY1, [point1], BODY2, [point2]")
    bodies, points = [], []
    for k in (0, 2):
        arg = node.args[k]
        if isinstance(arg, ast.Name):
            bodies.append(arg.id)
        elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            bodies.append(arg.value)
        else:
            raise ExpressionError(f"in '{text}': distance()'s argument {k + 1} must be a body name")
        point = node.args[k + 1]
        if not isinstance(point, (ast.List, ast.Tuple)):
            raise ExpressionError(f"in '{text}': distance()'s argument {k + 2} must be a point such as [0, 0, 0]")
        coords = []
        for element in point.elts:
            value = _substitute(_to_ir(element, _Names(names.parameters, frozenset()), text), names.parameters)
            if value[0] != "num":
                raise ExpressionError(f"in '{text}': a point of distance() has constant coordinates")
            coords.append(value[1])
        points.append(tuple(coords))
    try:
        return register(bodies[0], points[0], bodies[1], points[1])
    except ValueError as exc:
        raise ExpressionError(f"in '{text}': {exc}") from None


def _depth(tree: ast.AST) -> int:
    """Nesting depth of a syntax tree, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _is_num(n: Node, value: float | None = None) -> bool:
    return n[0] == "num" and (value is None or n[1] == value)


def _simplify(n: Node) -> Node:
    """Fold constants and drop zeros and ones, so that derivatives stay small."""
    kind = n[0]
    if kind == "neg":
        a = n[1]
        if _is_num(a):
            return ("num", -a[1])
        if a[0] == "neg":
            return a[1]
        return n
    if kind == "cmp":
        if _is_num(n[2]) and _is_num(n[3]):
            return ("num", float(_CMP_IMPL[n[1]](n[2][1], n[3][1])))
        return n
    if kind == "bin":
        op, a, b = n[1], n[2], n[3]
        if _is_num(a) and _is_num(b):
            with np.errstate(all="ignore"):
                return ("num", float(_BIN_IMPL[op](a[1], b[1])))
        if op == "+":
            if _is_num(a, 0.0):
                return b
            if _is_num(b, 0.0):
                return a
        elif op == "-":
            if _is_num(b, 0.0):
                return a
            if _is_num(a, 0.0):
                return _simplify(("neg", b))
        elif op == "*":
            if _is_num(a, 0.0) or _is_num(b, 0.0):
                return ("num", 0.0)
            if _is_num(a, 1.0):
                return b
            if _is_num(b, 1.0):
                return a
        elif op == "/":
            if _is_num(a, 0.0):
                return ("num", 0.0)
            if _is_num(b, 1.0):
                return a
        elif op == "**":
            if _is_num(b, 0.0):
                return ("num", 1.0)
            if _is_num(b, 1.0):
                return a
    return n


def _children(n: Node) -> tuple[Node, ...]:
    kind = n[0]
    if kind == "neg":
        return (n[1],)
    if kind in ("bin", "cmp"):
        return (n[2], n[3])
    if kind == "call":
        return n[2]
    return ()


def _postorder(root: Node) -> list[Node]:
    """The distinct nodes of ``root`` (shared subtrees once), children before parents; iterative,
    so that neither deep nor shared trees (derivatives share subtrees) cost more than their size."""
    seen: set[int] = set()
    order: list[Node] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(_children(node)) if id(c) not in seen)
    return order


def _height(root: Node) -> int:
    """Nesting depth of an IR tree, without recursion."""
    heights: dict[int, int] = {}
    for n in _postorder(root):
        heights[id(n)] = 1 + max((heights[id(c)] for c in _children(n)), default=0)
    return heights[id(root)]


def _d(root: Node, var: str) -> Node:
    """Symbolic derivative of an IR tree with respect to the variable ``var``.

    Each distinct node is differentiated once (children first), so the result shares the
    subtrees of ``root`` and of the children's derivatives: its size grows linearly with each
    derivative, however deep the expression.
    """
    done: dict[int, Node] = {}
    for n in _postorder(root):
        done[id(n)] = _d_node(n, var, lambda child: done[id(child)])
    return done[id(root)]


def _d_node(n: Node, var: str, d: Callable[[Node], Node]) -> Node:
    """Derivative of one node, given ``d(child)``, the derivatives of its children."""
    s = _simplify
    kind = n[0]
    if kind == "num":
        return ("num", 0.0)
    if kind == "var":
        return ("num", 1.0 if n[1] == var else 0.0)
    if kind == "neg":
        return s(("neg", d(n[1])))
    if kind == "cmp":
        return ("num", 0.0)
    if kind == "bin":
        op, a, b = n[1], n[2], n[3]
        da, db = d(a), d(b)
        if op in ("+", "-"):
            return s(("bin", op, da, db))
        if op == "*":
            return s(("bin", "+", s(("bin", "*", da, b)), s(("bin", "*", a, db))))
        if op == "/":
            num = s(("bin", "-", s(("bin", "*", da, b)), s(("bin", "*", a, db))))
            return s(("bin", "/", num, s(("bin", "**", b, ("num", 2.0)))))
        if op == "**":
            if _is_num(db, 0.0):  # d(a^c) = c a^(c-1) a'
                power = s(("bin", "**", a, s(("bin", "-", b, ("num", 1.0)))))
                return s(("bin", "*", s(("bin", "*", b, power)), da))
            # d(a^b) = a^b (b' log a + b a'/a)
            log_a = ("call", "log", (a,))
            inner = s(("bin", "+", s(("bin", "*", db, log_a)), s(("bin", "/", s(("bin", "*", b, da)), a))))
            return s(("bin", "*", n, inner))
    if kind == "call":
        f, args = n[1], n[2]
        if f in ("floor", "ceil", "sign"):
            return ("num", 0.0)
        if f == "mod":  # d(a - b floor(a/b)) = a' - b' floor(a/b), away from the jumps
            a, b = args
            quotient = ("call", "floor", (("bin", "/", a, b),))
            return s(("bin", "-", d(a), s(("bin", "*", d(b), quotient))))
        if f == "where":
            c, a, b = args
            return ("call", "where", (c, d(a), d(b)))
        if f in ("min", "max"):
            a, b = args
            test = ("cmp", "<=" if f == "min" else ">=", a, b)
            return ("call", "where", (test, d(a), d(b)))
        if f == "atan2":
            y, x = args
            num = s(("bin", "-", s(("bin", "*", x, d(y))), s(("bin", "*", y, d(x)))))
            den = ("bin", "+", ("bin", "**", x, ("num", 2.0)), ("bin", "**", y, ("num", 2.0)))
            return s(("bin", "/", num, den))
        (a,) = args
        da = d(a)
        if _is_num(da, 0.0):
            return ("num", 0.0)
        one = ("num", 1.0)
        a2 = ("bin", "**", a, ("num", 2.0))
        outer = {
            "sin": ("call", "cos", (a,)),
            "cos": ("neg", ("call", "sin", (a,))),
            "tan": ("bin", "/", one, ("bin", "**", ("call", "cos", (a,)), ("num", 2.0))),
            "asin": ("bin", "/", one, ("call", "sqrt", (("bin", "-", one, a2),))),
            "acos": ("neg", ("bin", "/", one, ("call", "sqrt", (("bin", "-", one, a2),)))),
            "atan": ("bin", "/", one, ("bin", "+", one, a2)),
            "sinh": ("call", "cosh", (a,)),
            "cosh": ("call", "sinh", (a,)),
            "tanh": ("bin", "-", one, ("bin", "**", ("call", "tanh", (a,)), ("num", 2.0))),
            "exp": n,
            "log": ("bin", "/", one, a),
            "sqrt": ("bin", "/", ("num", 0.5), n),
            "abs": ("call", "sign", (a,)),
        }[f]
        return s(("bin", "*", outer, da))
    raise AssertionError(f"unknown node {kind}")


def _compile(root: Node) -> Callable[[Mapping[str, float]], float]:
    """A function of the environment evaluating ``root``.

    A small tree becomes nested closures (fastest); a deep one, or one whose subtrees are
    shared many times (derivatives of deep expressions), becomes a flat program that evaluates
    each distinct node once, children first, without recursion: it costs the tree's size, never
    the size of its expansion.
    """
    order = _postorder(root)
    height: dict[int, int] = {}
    expanded: dict[int, int] = {}
    for n in order:
        kids = _children(n)
        height[id(n)] = 1 + max((height[id(c)] for c in kids), default=0)
        expanded[id(n)] = 1 + sum(expanded[id(c)] for c in kids)
    if height[id(root)] <= MAX_DEPTH and expanded[id(root)] <= 2 * len(order):
        return _closure(root)
    return _program(order)


def _closure(n: Node) -> Callable[[Mapping[str, float]], float]:
    kind = n[0]
    if kind == "num":
        value = n[1]
        return lambda env: value
    if kind == "var":
        name = n[1]
        return lambda env: env[name]
    if kind == "neg":
        inner = _closure(n[1])
        return lambda env: -inner(env)
    if kind in ("bin", "cmp"):
        impl = (_BIN_IMPL if kind == "bin" else _CMP_IMPL)[n[1]]
        left, right = _closure(n[2]), _closure(n[3])
        return lambda env: impl(left(env), right(env))
    impl = FUNCTIONS[n[1]][0]
    parts = [_closure(a) for a in n[2]]
    if len(parts) == 1:
        (only,) = parts
        return lambda env: impl(only(env))
    if len(parts) == 2:
        first, second = parts
        return lambda env: impl(first(env), second(env))
    return lambda env: impl(*[p(env) for p in parts])


def _program(order: list[Node]) -> Callable[[Mapping[str, float]], float]:
    """Evaluate the nodes of ``order`` (children first) into a list of values."""
    index = {id(n): i for i, n in enumerate(order)}
    template: list = [None] * len(order)
    steps: list[tuple[int, Callable]] = []
    for i, n in enumerate(order):
        kind = n[0]
        if kind == "num":
            template[i] = n[1]
            continue
        args = [index[id(c)] for c in _children(n)]
        if kind == "var":
            step = lambda v, env, name=n[1]: env[name]  # noqa: E731
        elif kind == "neg":
            step = lambda v, env, a=args[0]: -v[a]  # noqa: E731
        else:
            impl = FUNCTIONS[n[1]][0] if kind == "call" else (_BIN_IMPL if kind == "bin" else _CMP_IMPL)[n[1]]
            if len(args) == 1:
                step = lambda v, env, f=impl, a=args[0]: f(v[a])  # noqa: E731
            elif len(args) == 2:
                step = lambda v, env, f=impl, a=args[0], b=args[1]: f(v[a], v[b])  # noqa: E731
            else:
                step = lambda v, env, f=impl, a=tuple(args): f(*[v[k] for k in a])  # noqa: E731
        steps.append((i, step))
    last = len(order) - 1

    def run(env: Mapping[str, float]) -> float:
        v = template.copy()
        for i, step in steps:
            v[i] = step(v, env)
        return v[last]

    return run


def _variables(root: Node) -> set[str]:
    return {n[1] for n in _postorder(root) if n[0] == "var"}


@dataclass(frozen=True)
class Expression:
    """A checked, compiled expression.

    Attributes:
        text: the source text as written in the scene.
        tree: the intermediate form (nested tuples).
        variables: names of the free variables it uses (parameters are already folded in).
    """

    text: str
    tree: Node
    variables: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fn", _compile(self.tree))

    @property
    def is_constant(self) -> bool:
        return self.tree[0] == "num"

    def __call__(self, env: Mapping[str, float] | None = None) -> float:
        """Evaluate; ``env`` maps each free variable to a number or a numpy array."""
        with np.errstate(all="ignore"):
            return self._fn(env or {})  # type: ignore[attr-defined]

    def derivative(self, var: str = "t") -> Expression:
        """The exact symbolic derivative with respect to ``var``."""
        tree = _d(self.tree, var)
        return Expression(f"d/d{var}({self.text})", tree, frozenset(_variables(tree)))


def compile_expression(
    text: str | float | int,
    parameters: Mapping[str, float] | None = None,
    variables: frozenset[str] | set[str] = frozenset(),
) -> Expression:
    """Parse and check an expression; parameters are folded in as constants.

    Args:
        text: the expression (a number is accepted and becomes a constant).
        parameters: named numbers of the scene.
        variables: names that stay free (``t``, state variables of a force).

    Raises:
        ExpressionError: on syntax errors and on anything outside the language.
    """
    if isinstance(text, bool) or not isinstance(text, (str, numbers.Real)):
        raise ExpressionError(f"expected a number or an expression, got {_short(repr(text))}")
    if isinstance(text, numbers.Real):
        number = _number(text)
        return Expression(repr(number), ("num", number))
    parameters = parameters if parameters is not None else {}
    source = text.strip()
    if len(source) > MAX_LENGTH:
        raise ExpressionError(f"expression longer than {MAX_LENGTH} characters ({len(source)})")
    shown = _short(source, 80)  # messages quote the expression, cut when long
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"in '{shown}': syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):
        tree = None
    except ValueError as exc:  # e.g. a NUL character, or a literal past Python's integer digits
        raise ExpressionError(f"in '{shown}': {exc}") from None
    if tree is None or _depth(tree) > MAX_DEPTH:
        raise ExpressionError(f"in '{shown}': nested more than {MAX_DEPTH} levels deep")
    ir = _to_ir(tree.body, _Names(parameters, variables), shown)
    if _height(ir) > MAX_DEPTH:  # chains of comparisons, and, or, min, max nest here
        raise ExpressionError(f"in '{shown}': nested more than {MAX_DEPTH} levels deep (too many operands)")
    ir = _substitute(ir, parameters)
    return Expression(source, ir, frozenset(_variables(ir)))


def _substitute(n: Node, values: Mapping[str, float]) -> Node:
    """Replace parameter names by their numbers and fold constants."""
    kind = n[0]
    if kind == "var":
        return ("num", float(values[n[1]])) if n[1] in values else n
    if kind == "num":
        return n
    if kind == "neg":
        return _simplify(("neg", _substitute(n[1], values)))
    if kind in ("bin", "cmp"):
        return _simplify((kind, n[1], _substitute(n[2], values), _substitute(n[3], values)))
    if kind == "call":
        args = tuple(_substitute(a, values) for a in n[2])
        if all(_is_num(a) for a in args):
            with np.errstate(all="ignore"):
                value = FUNCTIONS[n[1]][0](*[a[1] for a in args])
            return ("num", float(value))
        return ("call", n[1], args)
    raise AssertionError(kind)


# ------------------------------------------------------------------------------ bytecode

# opcode numbers of the bytecode; mbsim.model.expr_kernel repeats them as a C enum (expr_kernel.pxd,
# compiled in) and checks them against this table at import
OPCODES: dict[str, int] = {
    name: code
    for code, name in enumerate(
        ["CONST", "NEG", "ADD", "SUB", "MUL", "DIV", "POW", "LT", "LE", "GT", "GE", "EQ", "NE"]
        + [f.upper() for f in FUNCTIONS]
    )
}
_BIN_OPCODES = {"+": "ADD", "-": "SUB", "*": "MUL", "/": "DIV", "**": "POW"}
_CMP_OPCODES = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}


@dataclass(frozen=True, eq=False)
class Programs:
    """Expressions as register bytecode, one instruction range per expression.

    Instruction ``i`` computes ``regs[dst[i]] = OP(regs[args[i, 0]], regs[args[i, 1]], regs[args[i, 2]])``
    (unused arguments are -1; ``CONST`` writes ``imm[i]``). Expression ``k`` is instructions
    ``start[k]:stop[k]``, its value ends in ``regs[result[k]]``; it reads the variables, held in
    order in registers ``0 .. len(variables) - 1``, and its own results only, so expressions run
    alone and in any order. Comparisons give 1.0 or 0.0, ``WHERE`` takes its second argument when
    the first is nonzero (NaN included). The arrays are read-only.

    Attributes:
        op: (ninstr,) int64 opcodes (:data:`OPCODES`).
        dst: (ninstr,) int64 destination registers.
        args: (ninstr, 3) int64 argument registers.
        imm: (ninstr,) float64 values of ``CONST``, else 0.
        start, stop: (nexpr,) int64 instruction range of each expression.
        result: (nexpr,) int64 register of each expression's value.
        nreg: registers a buffer needs for every expression.
        variables: the names held in registers ``0 .. len(variables) - 1``.
    """

    op: np.ndarray
    dst: np.ndarray
    args: np.ndarray
    imm: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    result: np.ndarray
    nreg: int
    variables: tuple[str, ...]


def _instruction(n: Node) -> tuple[str, tuple[Node, ...]]:
    """Opcode name and operand nodes of one non-variable node."""
    kind = n[0]
    if kind == "num":
        return "CONST", ()
    if kind == "neg":
        return "NEG", (n[1],)
    if kind == "bin":
        return _BIN_OPCODES[n[1]], (n[2], n[3])
    if kind == "cmp":
        return _CMP_OPCODES[n[1]], (n[2], n[3])
    if kind == "call" and n[1] in FUNCTIONS:
        arity = FUNCTIONS[n[1]][1]
        if len(n[2]) != (2 if arity == -1 else arity):  # min and max are binary in the tree
            raise ValueError(f"{n[1]}() with {len(n[2])} arguments in an expression tree")
        return n[1].upper(), n[2]
    raise ValueError(f"unknown node {_short(repr(n))} in an expression tree")


def compile_programs(expressions: Sequence[Expression], variables: Sequence[str]) -> Programs:
    """Flatten expressions into :class:`Programs`, so that one compiled interpreter evaluates any scene.

    Each distinct node (by identity: derivatives share subtrees) becomes at most one instruction,
    and equal instructions (same opcode, argument registers and constant) within an expression are
    merged; the walk is iterative, however deep the tree. Registers past the variables are one per
    instruction of the longest expression.

    Raises:
        ValueError: an expression uses a variable not in ``variables``, or a name is repeated.
    """
    names = tuple(variables)
    slot = {name: i for i, name in enumerate(names)}
    if len(slot) != len(names):
        raise ValueError(f"repeated variable names in {', '.join(names)}")
    rows: list[tuple[int, int, int, int, int, float]] = []
    start, stop, result = [], [], []
    nreg = len(names)
    for expression in expressions:
        first = len(rows)
        reg: dict[int, int] = {}  # id(node) -> register
        merged: dict[tuple, int] = {}  # (opcode, argument registers, constant bits) -> register
        for n in _postorder(expression.tree):
            if n[0] == "var":
                if n[1] not in slot:
                    raise ValueError(
                        f"in '{_short(expression.text, 80)}': variable '{n[1]}' is not one of "
                        f"the program's variables ({', '.join(names) or 'none'})"
                    )
                reg[id(n)] = slot[n[1]]
                continue
            name, operands = _instruction(n)
            code = OPCODES[name]
            operand_regs = tuple(reg[id(c)] for c in operands)
            imm = float(n[1]) if name == "CONST" else 0.0
            key = (code, operand_regs, struct.pack("<d", imm))  # bits: -0.0 and 0.0 stay apart
            if key not in merged:
                merged[key] = len(names) + len(rows) - first
                rows.append((code, merged[key], *operand_regs, *(-1,) * (3 - len(operand_regs)), imm))
            reg[id(n)] = merged[key]
        start.append(first)
        stop.append(len(rows))
        result.append(reg[id(expression.tree)])
        nreg = max(nreg, len(names) + len(rows) - first)

    def frozen(values: list, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
        out = np.array(values, dtype=dtype).reshape(shape)
        out.flags.writeable = False
        return out

    n = len(rows)
    return Programs(
        op=frozen([r[0] for r in rows], np.int64, (n,)),
        dst=frozen([r[1] for r in rows], np.int64, (n,)),
        args=frozen([r[2:5] for r in rows], np.int64, (n, 3)),
        imm=frozen([r[5] for r in rows], np.float64, (n,)),
        start=frozen(start, np.int64, (len(start),)),
        stop=frozen(stop, np.int64, (len(stop),)),
        result=frozen(result, np.int64, (len(result),)),
        nreg=nreg,
        variables=names,
    )
