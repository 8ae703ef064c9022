"""Compiled interpreter of scene expressions: the register bytecode of mbsim.scene.expr.compile_programs.

Why an interpreter: the expressions of a scene (drives, applied forces) must be evaluable inside
compiled kernels, and compiling a function per expression would need a C compiler per scene.
One compiled kernel runs the bytecode of any scene instead.

Semantics are those of ``Expression.__call__`` on float64 scalars (numpy under
``np.errstate(all="ignore")``), bit for bit: IEEE arithmetic, comparisons as 1.0 / 0.0, ``where``
true on any nonzero condition (NaN included), ``min`` / ``max`` propagating NaN from either side,
``mod`` as numpy's ``npy_remainder``, ``sign`` as numpy's, ``**`` as numpy's power with a scalar
exponent (its fast paths for -1, 0, 0.5, 1, 2). Elementary functions and other powers call the C
library, as numpy does unless it dispatches to its own SIMD code (x86-64: tanh with AVX2; exp,
log, pow, atan2, tan, asin, acos, atan, sinh, cosh with AVX-512), which is up to 3 ulp apart.
"""

from libc.math cimport (
    NAN, acos, asin, atan, atan2, ceil, cos, cosh, exp, fabs, floor, log, pow, sin, sinh, sqrt, tan, tanh,
)

from mbsim.scene.expr import OPCODES

# the opcodes of expr_kernel.pxd (a C enum) must be the bytecode's, else programs would be misread
_OPCODES = {
    "CONST": CONST, "NEG": NEG, "ADD": ADD, "SUB": SUB, "MUL": MUL, "DIV": DIV, "POW": POW,
    "LT": LT, "LE": LE, "GT": GT, "GE": GE, "EQ": EQ, "NE": NE,
    "SIN": SIN, "COS": COS, "TAN": TAN, "ASIN": ASIN, "ACOS": ACOS, "ATAN": ATAN, "ATAN2": ATAN2,
    "SINH": SINH, "COSH": COSH, "TANH": TANH, "EXP": EXP, "LOG": LOG, "SQRT": SQRT, "ABS": ABS,
    "MIN": MIN, "MAX": MAX, "FLOOR": FLOOR, "MOD": MOD, "CEIL": CEIL, "SIGN": SIGN, "WHERE": WHERE,
}  # fmt: skip
if _OPCODES != OPCODES:
    raise ImportError(f"opcodes of {__name__} differ from mbsim.scene.expr.OPCODES")


# numpy's float power with a scalar exponent (its POWER_FAST_PATH): exponents -1, 0, 0.5, 1 and 2
# are 1/a, 1, sqrt(a), a and a*a (sqrt(-0.0) is -0.0, sqrt(-inf) NaN, unlike pow), else pow
cdef inline double _pow(double a, double b) noexcept nogil:
    if b == 2.0:
        return a * a
    if b == 0.5:
        return sqrt(a)
    if b == -1.0:
        return 1.0 / a
    if b == 0.0:
        return 1.0
    if b == 1.0:
        return a
    return pow(a, b)


cpdef double run_expression(const long long[::1] op, const long long[::1] dst, const long long[:, ::1] args,
                            const double[::1] imm, const long long[::1] start, const long long[::1] stop,
                            const long long[::1] result, Py_ssize_t k, double[::1] regs) noexcept nogil:
    """Run expression ``k`` of a program (instructions ``start[k]:stop[k]``) on the float64 register
    buffer ``regs`` (at least ``nreg`` long, variables already in ``regs[0:nvars]``); returns its value.
    Allocates nothing."""
    if stop[k] > start[k]:
        run_instructions(&op[0], &dst[0], &args[0, 0], &imm[0], start[k], stop[k], &regs[0])
    return regs[result[k]]


cdef void run_instructions(const long long* op, const long long* dst, const long long* args, const double* imm,
                           Py_ssize_t first, Py_ssize_t last, double* regs) noexcept nogil:
    """The instructions first:last of a program (args: three per instruction) on ``regs``: the one
    interpreter loop, over raw pointers so that a compiled caller passes no memoryview."""
    cdef Py_ssize_t i
    cdef long long o
    cdef double v, x, y
    for i in range(first, last):
        o = op[i]
        if o == CONST:
            v = imm[i]
        else:
            x = regs[args[3 * i]]
            if o == ADD:
                v = x + regs[args[3 * i + 1]]
            elif o == SUB:
                v = x - regs[args[3 * i + 1]]
            elif o == MUL:
                v = x * regs[args[3 * i + 1]]
            elif o == DIV:
                v = x / regs[args[3 * i + 1]]
            elif o == POW:
                v = _pow(x, regs[args[3 * i + 1]])
            elif o == NEG:
                v = -x
            elif o == LT:
                v = 1.0 if x < regs[args[3 * i + 1]] else 0.0
            elif o == LE:
                v = 1.0 if x <= regs[args[3 * i + 1]] else 0.0
            elif o == GT:
                v = 1.0 if x > regs[args[3 * i + 1]] else 0.0
            elif o == GE:
                v = 1.0 if x >= regs[args[3 * i + 1]] else 0.0
            elif o == EQ:
                v = 1.0 if x == regs[args[3 * i + 1]] else 0.0
            elif o == NE:
                v = 1.0 if x != regs[args[3 * i + 1]] else 0.0
            elif o == SIN:
                v = sin(x)
            elif o == COS:
                v = cos(x)
            elif o == TAN:
                v = tan(x)
            elif o == ASIN:
                v = asin(x)
            elif o == ACOS:
                v = acos(x)
            elif o == ATAN:
                v = atan(x)
            elif o == ATAN2:
                v = atan2(x, regs[args[3 * i + 1]])
            elif o == SINH:
                v = sinh(x)
            elif o == COSH:
                v = cosh(x)
            elif o == TANH:
                v = tanh(x)
            elif o == EXP:
                v = exp(x)
            elif o == LOG:
                v = log(x)
            elif o == SQRT:
                v = sqrt(x)
            elif o == ABS:
                v = fabs(x)
            elif o == MIN:  # numpy: the first if it is smaller or NaN, else the second (NaN, and +0 of min(-0, +0))
                y = regs[args[3 * i + 1]]
                v = x if (x < y or x != x) else y
            elif o == MAX:
                y = regs[args[3 * i + 1]]
                v = x if (x > y or x != x) else y
            elif o == FLOOR:
                v = floor(x)
            elif o == CEIL:
                v = ceil(x)
            elif o == MOD:
                v = _mod(x, regs[args[3 * i + 1]])
            elif o == SIGN:  # numpy: NaN stays NaN, -0.0 gives +0.0
                v = 1.0 if x > 0.0 else (-1.0 if x < 0.0 else (0.0 if x == 0.0 else x))
            elif o == WHERE:  # any nonzero condition, NaN included, picks the second argument
                v = regs[args[3 * i + 1]] if x != 0.0 else regs[args[3 * i + 2]]
            else:
                v = NAN  # not an opcode: compile_programs never writes one
        regs[dst[i]] = v
