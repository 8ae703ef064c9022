"""Compiled interpreter of scene expressions: the register bytecode of mbsim.scene.expr.compile_programs.

Why an interpreter: the expressions of a scene (drives, applied forces) must be evaluable inside
compiled kernels, and compiling a function per expression would cost seconds of JIT per scene.
One cached kernel runs the bytecode of any scene instead, with no compilation after the first.

Semantics are those of ``Expression.__call__`` on float64 scalars (numpy under
``np.errstate(all="ignore")``), bit for bit: IEEE arithmetic, comparisons as 1.0 / 0.0, ``where``
true on any nonzero condition (NaN included), ``min`` / ``max`` propagating NaN from either side,
``mod`` as numpy's ``npy_remainder``, ``sign`` as numpy's, ``**`` as numpy's power with a scalar
exponent (its fast paths for -1, 0, 0.5, 1, 2). Elementary functions and other powers call the C
library, as numpy does unless it dispatches to its own SIMD code (x86-64: tanh with AVX2; exp,
log, pow, atan2, tan, asin, acos, atan, sinh, cosh with AVX-512), which is up to 3 ulp apart.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.scene.expr import OPCODES

# opcodes as literals: numba freezes globals into the cached kernel, whose cache sees only this file
CONST, NEG, ADD, SUB, MUL, DIV, POW = 0, 1, 2, 3, 4, 5, 6
LT, LE, GT, GE, EQ, NE = 7, 8, 9, 10, 11, 12
SIN, COS, TAN, ASIN, ACOS, ATAN, ATAN2 = 13, 14, 15, 16, 17, 18, 19
SINH, COSH, TANH, EXP, LOG, SQRT, ABS = 20, 21, 22, 23, 24, 25, 26
MIN, MAX, FLOOR, MOD, CEIL, SIGN, WHERE = 27, 28, 29, 30, 31, 32, 33

if {name: globals().get(name) for name in OPCODES} != OPCODES:  # else a stale kernel would misread programs
    raise ImportError(f"opcodes of {__name__} differ from mbsim.scene.expr.OPCODES")


@njit(inline="always", error_model="numpy")
def _mod(a, b):
    """numpy's float remainder (npy_remainder / npy_divmod): the sign of b, NaN for b == 0."""
    mod = np.fmod(a, b)
    if b == 0.0:
        return mod
    if mod != 0.0:  # NaN included, as C's `if (mod)`
        if (b < 0.0) != (mod < 0.0):
            mod += b
        return mod
    return math.copysign(0.0, b)


@njit(inline="always", error_model="numpy")
def _pow(a, b):
    """numpy's float power with a scalar exponent (its POWER_FAST_PATH): exponents -1, 0, 0.5, 1
    and 2 are 1/a, 1, sqrt(a), a and a*a (sqrt(-0.0) is -0.0, sqrt(-inf) NaN, unlike pow), else pow."""
    if b == 2.0:
        return a * a
    if b == 0.5:
        return math.sqrt(a)
    if b == -1.0:
        return 1.0 / a
    if b == 0.0:
        return 1.0
    if b == 1.0:
        return a
    return a**b


@njit(cache=True, nogil=True, error_model="numpy")
def run_expression(op, dst, args, imm, start, stop, result, k, regs):
    """Run expression ``k`` of a program (instructions ``start[k]:stop[k]``) on the float64 register
    buffer ``regs`` (at least ``nreg`` long, variables already in ``regs[0:nvars]``); returns its value.
    Allocates nothing."""
    for i in range(start[k], stop[k]):
        o = op[i]
        if o == CONST:
            v = imm[i]
        else:
            x = regs[args[i, 0]]
            if o == ADD:
                v = x + regs[args[i, 1]]
            elif o == SUB:
                v = x - regs[args[i, 1]]
            elif o == MUL:
                v = x * regs[args[i, 1]]
            elif o == DIV:
                v = x / regs[args[i, 1]]
            elif o == POW:
                v = _pow(x, regs[args[i, 1]])
            elif o == NEG:
                v = -x
            elif o == LT:
                v = 1.0 if x < regs[args[i, 1]] else 0.0
            elif o == LE:
                v = 1.0 if x <= regs[args[i, 1]] else 0.0
            elif o == GT:
                v = 1.0 if x > regs[args[i, 1]] else 0.0
            elif o == GE:
                v = 1.0 if x >= regs[args[i, 1]] else 0.0
            elif o == EQ:
                v = 1.0 if x == regs[args[i, 1]] else 0.0
            elif o == NE:
                v = 1.0 if x != regs[args[i, 1]] else 0.0
            elif o == SIN:
                v = math.sin(x)
            elif o == COS:
                v = math.cos(x)
            elif o == TAN:
                v = math.tan(x)
            elif o == ASIN:
                v = math.asin(x)
            elif o == ACOS:
                v = math.acos(x)
            elif o == ATAN:
                v = math.atan(x)
            elif o == ATAN2:
                v = math.atan2(x, regs[args[i, 1]])
            elif o == SINH:
                v = math.sinh(x)
            elif o == COSH:
                v = math.cosh(x)
            elif o == TANH:
                v = math.tanh(x)
            elif o == EXP:
                v = math.exp(x)
            elif o == LOG:
                v = math.log(x)
            elif o == SQRT:
                v = math.sqrt(x)
            elif o == ABS:
                v = abs(x)
            elif o == MIN:  # numpy: the first if it is smaller or NaN, else the second (NaN, and +0 of min(-0, +0))
                y = regs[args[i, 1]]
                v = x if (x < y or x != x) else y
            elif o == MAX:
                y = regs[args[i, 1]]
                v = x if (x > y or x != x) else y
            elif o == FLOOR:
                v = np.floor(x)  # math.floor gives an integer
            elif o == CEIL:
                v = np.ceil(x)
            elif o == MOD:
                v = _mod(x, regs[args[i, 1]])
            elif o == SIGN:  # numpy: NaN stays NaN, -0.0 gives +0.0
                v = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else (0.0 if x == 0.0 else x))
            elif o == WHERE:  # any nonzero condition, NaN included, picks the second argument
                v = regs[args[i, 1]] if x != 0.0 else regs[args[i, 2]]
            else:
                v = math.nan  # not an opcode: compile_programs never writes one
        regs[dst[i]] = v
    return regs[result[k]]
