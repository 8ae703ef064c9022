# The compiled interpreter of scene expressions (expr_kernel.pyx): the register bytecode of
# mbsim.scene.expr.compile_programs, run from the compiled right-hand side (step_kernels).

from libc.math cimport copysign, fmod

# opcodes of the bytecode; expr_kernel.pyx checks them against mbsim.scene.expr.OPCODES at import
cdef enum:
    CONST = 0
    NEG = 1
    ADD = 2
    SUB = 3
    MUL = 4
    DIV = 5
    POW = 6
    LT = 7
    LE = 8
    GT = 9
    GE = 10
    EQ = 11
    NE = 12
    SIN = 13
    COS = 14
    TAN = 15
    ASIN = 16
    ACOS = 17
    ATAN = 18
    ATAN2 = 19
    SINH = 20
    COSH = 21
    TANH = 22
    EXP = 23
    LOG = 24
    SQRT = 25
    ABS = 26
    MIN = 27
    MAX = 28
    FLOOR = 29
    MOD = 30
    CEIL = 31
    SIGN = 32
    WHERE = 33


# numpy's float remainder (npy_remainder / npy_divmod): the sign of b, NaN for b == 0; also
# Python's float % for b != 0 (under cdivision, % on doubles is C's fmod: the sign of a)
cdef inline double _mod(double a, double b) noexcept nogil:
    cdef double mod = fmod(a, b)
    if b == 0.0:
        return mod
    if mod != 0.0:  # NaN included, as C's `if (mod)`
        if (b < 0.0) != (mod < 0.0):
            mod += b
        return mod
    return copysign(0.0, b)


# Run expression k of a program (instructions start[k]:stop[k]) on the float64 register buffer
# regs (variables already in regs[0:nvars]); returns its value. cpdef: Python calls it by the
# same name (tests), C without the Python layer. Allocates nothing.
cpdef double run_expression(const long long[::1] op, const long long[::1] dst, const long long[:, ::1] args,
                            const double[::1] imm, const long long[::1] start, const long long[::1] stop,
                            const long long[::1] result, Py_ssize_t k, double[::1] regs) noexcept nogil
# The interpreter loop over instructions first:last of a program (args: 3 per instruction, row-major)
# on regs, over raw pointers (a compiled caller passes no memoryview); run_expression wraps it.
cdef void run_instructions(const long long* op, const long long* dst, const long long* args, const double* imm,
                           Py_ssize_t first, Py_ssize_t last, double* regs) noexcept nogil


# Value of expression k of a FlatModel's programs (prog_* arrays) on regs: the caller passes the
# arrays' data pointers, nothing else is copied.
cdef inline double program_value(const long long* op, const long long* dst, const long long* args,
                                 const double* imm, const long long* start, const long long* stop,
                                 const long long* result, Py_ssize_t k, double* regs) noexcept nogil:
    if stop[k] > start[k]:
        run_instructions(op, dst, args, imm, start[k], stop[k], regs)
    return regs[result[k]]
