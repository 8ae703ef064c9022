"""LCP solvers (mbsim.solvers.numerics.lcp): PGS and Lemke against each other, against enumeration of
the complementary index sets, and against analytic small cases (bilateral rows, a friction box)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mbsim.solvers.numerics.lcp import LCPError, LCPResult, brute_force_lcp, complementarity_error, lemke, pgs

INF = np.inf


def random_spd(rng: np.random.Generator, n: int, eps: float = 1e-2) -> np.ndarray:
    """B B^T + eps I with B (n, n) standard normal: symmetric positive definite, so a P-matrix."""
    B = rng.standard_normal((n, n))
    return B @ B.T + eps * np.eye(n)


def random_p_nonsymmetric(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """A nonsymmetric P-matrix: strictly row diagonally dominant with a positive diagonal, or
    M = S + K with S symmetric positive definite and K skew (M + M^T > 0)."""
    if kind == "dominant":
        M = rng.standard_normal((n, n))
        np.fill_diagonal(M, 0.0)
        M[np.diag_indices(n)] = np.abs(M).sum(axis=1) + rng.uniform(0.1, 1.0, n)
        return M
    K = rng.standard_normal((n, n))
    return random_spd(rng, n, 0.1) + 2.0 * (K - K.T)


def scale(z: np.ndarray) -> float:
    return max(1.0, float(np.abs(z).max(initial=0.0)))


# ------------------------------------------------------------------ standard LCP: PGS, Lemke, enumeration


def test_pgs_and_lemke_agree_on_200_random_spd_problems():
    rng = np.random.default_rng(20240601)
    worst_diff = worst_pgs = worst_lemke = 0.0
    for k in range(200):
        n = 1 + k % 40
        M = random_spd(rng, n)
        q = rng.standard_normal(n) * rng.uniform(0.1, 10.0)
        r_lemke = lemke(M, q)
        r_pgs = pgs(M, q, 0.0, INF, iterations=20_000, tol=1e-14)
        assert r_pgs.converged, (k, n, r_pgs.iterations)
        diff = np.abs(r_pgs.x - r_lemke.x).max() / scale(r_lemke.x)
        worst_diff = max(worst_diff, diff)
        worst_pgs = max(worst_pgs, r_pgs.complementarity)
        worst_lemke = max(worst_lemke, r_lemke.complementarity)
        assert r_lemke.complementarity == pytest.approx(complementarity_error(M, q, r_lemke.x))
        np.testing.assert_allclose(r_lemke.w, M @ r_lemke.x + q, rtol=0, atol=1e-12 * scale(r_lemke.w))
        if n <= 10:
            z = brute_force_lcp(M, q)
            assert np.abs(r_lemke.x - z).max() <= 1e-8 * scale(z), (k, n)
            assert np.abs(r_pgs.x - z).max() <= 1e-8 * scale(z), (k, n)
    assert worst_diff < 1e-8
    assert worst_pgs < 1e-8
    assert worst_lemke < 1e-8


@pytest.mark.parametrize("kind", ["dominant", "skew"])
def test_lemke_on_nonsymmetric_p_matrices_matches_brute_force(kind):
    rng = np.random.default_rng(7)
    for k in range(60):
        n = 1 + k % 9
        M = random_p_nonsymmetric(rng, n, kind)
        q = rng.standard_normal(n)
        result = lemke(M, q)
        z = brute_force_lcp(M, q)
        assert result.converged
        assert np.abs(result.x - z).max() <= 1e-9 * scale(z), (k, n)
        assert result.complementarity < 1e-10


def test_lemke_on_degenerate_q_matches_brute_force():
    # repeated and zero entries of q make ties in the ratio test (degenerate pivots)
    rng = np.random.default_rng(11)
    for k in range(60):
        n = 2 + k % 7
        M = random_p_nonsymmetric(rng, n, "dominant") if k % 2 else random_spd(rng, n, 0.1)
        q = rng.choice([-1.0, -1.0, 0.0, 1.0], size=n)
        result = lemke(M, q)
        z = brute_force_lcp(M, q)
        assert np.abs(result.x - z).max() <= 1e-9 * scale(z), (k, q)
        assert result.complementarity < 1e-10


def test_lemke_returns_zero_for_nonnegative_q():
    M = np.array([[2.0, 1.0], [1.0, 2.0]])
    result = lemke(M, np.array([0.0, 3.0]))
    assert isinstance(result, LCPResult)
    assert result.iterations == 0 and result.converged
    np.testing.assert_array_equal(result.z, [0.0, 0.0])
    np.testing.assert_array_equal(result.w, [0.0, 3.0])


def test_lemke_small_analytic_case():
    # w = 2 z - 4 >= 0, z >= 0, z w = 0: z = 2 (one pivot for z0, one for z)
    result = lemke(np.array([[2.0]]), np.array([-4.0]))
    assert result.x == pytest.approx([2.0])
    assert result.w == pytest.approx([0.0], abs=1e-15)
    assert result.iterations == 2


@pytest.mark.parametrize(
    ("M", "q"),
    [
        ([[-1.0]], [-1.0]),  # w = -z - 1 < 0 for every z >= 0
        ([[-1.0, 0.0], [0.0, -1.0]], [-1.0, -2.0]),  # M = -I, q < 0
        ([[0.0, -1.0], [1.0, 0.0]], [-1.0, -1.0]),  # skew (copositive-plus) but infeasible: w_0 = -z_1 - 1 < 0
    ],
)
def test_lemke_ray_termination_raises(M, q):
    with pytest.raises(LCPError, match="no complementary index set"):
        brute_force_lcp(M, q)  # the examples really have no solution
    with pytest.raises(LCPError, match="ray termination.*may have no solution"):
        lemke(M, q)


def test_lemke_max_pivots_raises():
    rng = np.random.default_rng(3)
    M = random_spd(rng, 10, 0.5)
    q = -np.abs(rng.standard_normal(10)) - 1.0
    assert lemke(M, q).iterations > 2
    with pytest.raises(LCPError, match="max_pivots=2"):
        lemke(M, q, max_pivots=2)
    assert issubclass(LCPError, ValueError)


def test_brute_force_refuses_large_problems():
    with pytest.raises(ValueError, match="n <= 12"):
        brute_force_lcp(np.eye(13), -np.ones(13))


# ------------------------------------------------------------------ complementarity_error


def test_complementarity_error_is_the_natural_residual():
    M = np.array([[2.0, 1.0], [1.0, 3.0]])
    q = np.array([-1.0, 1.0])
    x = np.array([0.3, 0.2])
    w = M @ x + q
    assert complementarity_error(M, q, x) == pytest.approx(np.abs(np.minimum(x, w)).max())
    lo, hi = np.array([-1.0, 0.25]), np.array([0.5, 2.0])
    expected = np.abs(x - np.clip(x - w, lo, hi)).max()
    assert complementarity_error(M, q, x, lo, hi) == pytest.approx(expected)
    # sparse A gives the same value; the exact solution of a bilateral system gives zero
    assert complementarity_error(sp.csr_array(M), q, x) == pytest.approx(np.abs(np.minimum(x, w)).max())
    exact = np.linalg.solve(M, -q)
    assert complementarity_error(M, q, exact, -INF, INF) < 1e-15


# ------------------------------------------------------------------ PGS: box MLCP, friction, options


def test_pgs_bilateral_rows_give_the_linear_solution():
    rng = np.random.default_rng(5)
    n = 12
    A = random_spd(rng, n, 1.0)
    b = rng.standard_normal(n)
    result = pgs(A, b, -INF, INF, iterations=5000, tol=1e-14)
    np.testing.assert_allclose(result.x, np.linalg.solve(A, -b), rtol=0, atol=1e-10)
    assert result.converged and result.complementarity < 1e-10

    # mixed rows: bilateral rows and standard rows whose solution is strictly positive (no bound active)
    kind = np.arange(n) % 2 == 0
    lo = np.where(kind, -INF, 0.0)
    x_star = np.where(kind, rng.standard_normal(n), rng.uniform(0.5, 2.0, n))
    result = pgs(A, -A @ x_star, lo, INF, iterations=5000, tol=1e-14)
    np.testing.assert_allclose(result.x, x_star, rtol=0, atol=1e-10)


def test_pgs_finite_boxes_solve_the_box_mlcp():
    # with A symmetric positive definite the box MLCP (a box-constrained QP) has one solution,
    # so a zero natural residual is the check
    rng = np.random.default_rng(9)
    n = 25
    A = random_spd(rng, n, 1.0)
    b = 5.0 * rng.standard_normal(n)
    lo = -rng.uniform(0.0, 1.0, n)
    hi = rng.uniform(0.0, 1.0, n)
    result = pgs(A, b, lo, hi, iterations=10_000, tol=1e-14)
    assert result.converged
    assert np.all(result.x >= lo) and np.all(result.x <= hi)
    assert complementarity_error(A, b, result.x, lo, hi) < 1e-10
    at_lo, at_hi = result.x == lo, result.x == hi
    assert at_lo.any() and at_hi.any()  # the case exercises both bounds
    assert np.all(result.w[at_lo] >= -1e-10) and np.all(result.w[at_hi] <= 1e-10)


# one contact, rows (normal, tangent), A = [[2, 0.5], [0.5, 1]], mu = 0.5:
# sticking: x = -A^-1 b with |x_t| <= mu x_n; sliding: x_t = -s mu x_n, x_n = -b_n / (2 - 0.5 s mu),
# with w_t of sign s (x_t at its lower bound for s = +1, at its upper bound for s = -1)
FRICTION_CASES = [
    ("stick", [-2.0, -0.5], [1.0, 0.0]),
    ("slide+", [-2.0, 2.0], [8 / 7, -4 / 7]),
    ("slide-", [-2.0, -3.0], [8 / 9, 4 / 9]),
    ("no contact", [1.0, 3.0], [0.0, 0.0]),
]


@pytest.mark.parametrize(("case", "b", "expected"), FRICTION_CASES, ids=[c[0] for c in FRICTION_CASES])
def test_pgs_friction_box_single_contact(case, b, expected):
    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    b = np.array(b)
    mu = np.array([0.0, 0.5])
    fn = np.array([-1, 0])
    result = pgs(A, b, [0.0, -INF], [INF, INF], friction_normal=fn, mu=mu, iterations=1000, tol=1e-14)
    assert result.converged
    np.testing.assert_allclose(result.x, expected, rtol=0, atol=1e-12)
    x_n, x_t = result.x
    w_t = result.w[1]
    if case == "stick":
        assert abs(x_t) < 0.5 * x_n and abs(w_t) < 1e-12
    elif case == "slide+":
        assert x_t == pytest.approx(-0.5 * x_n) and w_t > 0
    elif case == "slide-":
        assert x_t == pytest.approx(0.5 * x_n) and w_t < 0
    assert result.complementarity < 1e-12


@pytest.mark.parametrize("load", [0.2, 0.49, 0.51, 2.0, -0.3, -1.5])
def test_pgs_friction_threshold_decoupled(load):
    # A = I, unit normal impulse, mu = 0.5: a tangential load |b_t| below mu sticks (x_t = -b_t),
    # beyond it slides at the friction bound x_t = -mu sign(b_t)
    result = pgs(np.eye(2), [-1.0, load], [0.0, 0.0], [INF, 0.0], friction_normal=[-1, 0], mu=[0.0, 0.5])
    expected_t = -load if abs(load) <= 0.5 else -0.5 * np.sign(load)
    assert result.x == pytest.approx([1.0, expected_t], abs=1e-12)


def test_pgs_warm_start_reduces_sweeps():
    rng = np.random.default_rng(13)
    n = 30
    A = random_spd(rng, n, 0.1)
    b = rng.standard_normal(n)
    cold = pgs(A, b, 0.0, INF, iterations=20_000, tol=1e-12)
    again = pgs(A, b, 0.0, INF, cold.x, iterations=20_000, tol=1e-12)
    assert cold.converged and again.converged
    assert again.iterations <= 2 < cold.iterations
    # a nearby problem (the next time step) also starts closer
    b2 = b + 1e-3 * rng.standard_normal(n)
    cold2 = pgs(A, b2, 0.0, INF, iterations=20_000, tol=1e-12)
    warm2 = pgs(A, b2, 0.0, INF, cold.x, iterations=20_000, tol=1e-12)
    assert warm2.iterations < cold2.iterations
    np.testing.assert_allclose(warm2.x, cold2.x, rtol=0, atol=1e-9)


def test_pgs_warm_start_is_clipped_to_the_bounds():
    A = np.eye(3)
    result = pgs(A, [1.0, 1.0, 1.0], 0.0, INF, x0=[-5.0, 2.0, 0.0], iterations=0)
    np.testing.assert_array_equal(result.x, [0.0, 2.0, 0.0])
    assert result.iterations == 0 and not result.converged


def test_pgs_over_relaxation_converges_to_the_same_solution():
    rng = np.random.default_rng(17)
    n = 30
    A = random_spd(rng, n, 0.1)
    b = rng.standard_normal(n)
    plain = pgs(A, b, 0.0, INF, iterations=20_000, tol=1e-14)
    sor = pgs(A, b, 0.0, INF, iterations=20_000, tol=1e-14, omega=1.3)
    assert plain.converged and sor.converged
    np.testing.assert_allclose(sor.x, plain.x, rtol=0, atol=1e-9 * scale(plain.x))
    assert sor.complementarity < 1e-9


def test_pgs_csr_matches_dense():
    # a sparse contact-like problem: normal rows with two friction rows each, plus bilateral rows
    rng = np.random.default_rng(19)
    ncontact, nbilateral, ndof = 40, 10, 90
    m = 3 * ncontact + nbilateral
    J = sp.random(m, ndof, density=0.05, random_state=19, format="csr") + sp.eye(m, ndof, format="csr")
    A_sparse = (J @ J.T + 1e-2 * sp.eye(m)).tocsr()
    A_dense = A_sparse.toarray()
    b = rng.standard_normal(m)
    fn = np.full(m, -1)
    normals = np.arange(0, 3 * ncontact, 3)
    fn[normals + 1] = normals
    fn[normals + 2] = normals
    mu = np.full(m, 0.4)
    lo = np.zeros(m)
    lo[3 * ncontact :] = -INF
    kwargs = {"friction_normal": fn, "mu": mu, "iterations": 3000, "tol": 1e-12}
    dense = pgs(A_dense, b, lo, INF, **kwargs)
    for A in (A_sparse, sp.csr_matrix(A_sparse), sp.coo_array(A_sparse)):
        sparse = pgs(A, b, lo, INF, **kwargs)
        np.testing.assert_allclose(sparse.x, dense.x, rtol=0, atol=1e-12 * scale(dense.x))
        assert sparse.iterations == dense.iterations
        assert sparse.converged == dense.converged
    assert dense.converged and dense.complementarity < 1e-8
    # friction boxes hold: |x_t| <= mu x_n
    assert np.all(np.abs(dense.x[normals + 1]) <= 0.4 * dense.x[normals] + 1e-12)


# ------------------------------------------------------------------ input errors


@pytest.mark.parametrize("sparse", [False, True])
def test_pgs_rejects_nonpositive_diagonal(sparse):
    A = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"row 2: .*A\[2, 2\] > 0"):
        pgs(sp.csr_array(A) if sparse else A, np.ones(3), 0.0, INF)
    A[1, 1] = -1.0
    with pytest.raises(ValueError, match="row 1"):
        pgs(sp.csr_array(A) if sparse else A, np.ones(3), 0.0, INF)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"omega": 2.0}, "omega"),
        ({"friction_normal": np.array([-1, 0])}, "given together"),
        ({"friction_normal": np.array([1, 0]), "mu": np.ones(2)}, "friction_normal"),
        ({"friction_normal": np.array([-1, 5]), "mu": np.ones(2)}, "friction_normal"),
        ({"friction_normal": np.array([-1, 0]), "mu": np.array([0.0, -1.0])}, "mu"),
        ({"lo": np.array([1.0, 0.0]), "hi": np.array([0.0, 1.0])}, "lo <= hi"),
    ],
)
def test_pgs_rejects_bad_options(kwargs, message):
    args = {"lo": 0.0, "hi": INF, **kwargs}
    with pytest.raises(ValueError, match=message):
        pgs(np.eye(2), np.ones(2), **args)


def test_pgs_accepts_lists_and_an_empty_problem():
    result = pgs([[2.0, 0.0], [0.0, 1.0]], [-2.0, 1.0], [0.0, 0.0], [INF, INF])
    assert result.x == pytest.approx([1.0, 0.0])
    empty = pgs(np.zeros((0, 0)), np.zeros(0), 0.0, INF)
    assert empty.x.shape == (0,) and empty.complementarity == 0.0
    assert lemke(np.zeros((0, 0)), np.zeros(0)).x.shape == (0,)
