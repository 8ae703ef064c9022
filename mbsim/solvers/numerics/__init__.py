"""What several solver methods share: dense and envelope linear algebra (LAPACK through
scipy.linalg.cython_lapack), the rank-robust acceleration solves, the LCP solvers and the
contact LCP, and the projection of states onto the constraint manifold."""
