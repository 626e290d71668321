"""Shared linear algebra of the constrained solvers: a proximal least-norm solve and the
rank / conditioning diagnostic."""
from __future__ import annotations

import jax
import jax.numpy as jnp

PROX_ITERS = 4
"""Proximal iterations (fixed count: reverse-differentiable, no while loop)."""
RANK_TOL = 1e-9
"""Eigenvalues below RANK_TOL * max eigenvalue (float64; 100 machine epsilons, 1.2e-5, in
float32, whose eigenvalues carry that rounding) count as zero in the rank diagnostic."""


def _jacobi(A):
    """D^-1/2 A D^-1/2 (D = diag A; rows with a zero diagonal, all zero in a PSD A, kept)."""
    d = jnp.diagonal(A, axis1=-2, axis2=-1)
    s = jax.lax.rsqrt(jnp.where(d > 0, d, 1.0))
    return s[..., :, None] * A * s[..., None, :]


def diagnostics(A, after, tol=None):
    """(numerical rank, condition number on the range) of a PSD matrix A in its Jacobi-scaled
    form D^-1/2 A D^-1/2 (D = diag A), so that rows of different units (forces and moments,
    metres and radians) weigh alike: eigenvalues below ``tol`` times the largest count as zero
    (``tol`` None: :data:`RANK_TOL`, or 100 machine epsilons where that is larger).  Not
    differentiated: a diagnostic, not a value of the dynamics.

    ``after``: the solver's result (non-empty).  The eigenvalue decomposition reads it (A + 0 *
    min|after|: a data dependency XLA keeps; an optimization barrier is removed on the CPU) and so runs
    after the solver's Cholesky factorization, never beside it: in jaxlib 0.10, two batched
    LAPACK calls side by side stall XLA:CPU for good (each holds a thread of the intra-op
    pool while it waits for its batch's pieces queued on that pool)."""
    A = jax.lax.stop_gradient(A + 0.0 * jnp.min(jnp.abs(after)))
    As = _jacobi(A)
    lam = jnp.linalg.eigvalsh(0.5 * (As + As.T))
    top = jnp.maximum(lam[-1], jnp.finfo(A.dtype).tiny)
    tol = max(RANK_TOL, 100 * float(jnp.finfo(A.dtype).eps)) if tol is None else tol
    keep = lam > tol * top
    rank = jnp.sum(keep)
    low = jnp.min(jnp.where(keep, lam, top))
    return rank, top / low


def prox_eps(diag, weights=None):
    """The proximal shift of a PSD system with diagonal entries ``diag`` (..., n), per row:
    eps_i = rel * max(diag_i, rel * mean), the mean over the last axis weighted by ``weights``
    (..., n) when given (e.g. a 0/1 mask of real rows); rel = 1e-10 in float64 and 200 machine
    epsilons (2.4e-5) in float32, where a smaller shift would vanish in rounding and leave
    A + diag(eps) singular.  Proportional to the diagonal, the shift is the same fraction of
    every row whatever its units."""
    dt = jnp.result_type(diag)
    rel = max(1e-10, 200 * float(jnp.finfo(dt).eps))
    w = jnp.ones_like(diag) if weights is None else weights
    mean = jnp.sum(diag * w, -1, keepdims=True) / jnp.maximum(jnp.sum(w, -1, keepdims=True), 1.0)
    return rel * jnp.maximum(diag, jnp.maximum(rel * mean, jnp.finfo(dt).tiny))


def prox_solve(A, b, eps):
    """Least-norm solution of A x = b for PSD A (m, m) by proximal iterations with the shift
    ``eps`` (m,) or () (:func:`prox_eps`; see :mod:`jaxdyn.constraints.dynamics`)."""
    m = A.shape[0]
    Ar = A + jnp.diag(jnp.broadcast_to(eps, (m,)))
    L = jnp.linalg.cholesky(Ar)
    solve = lambda r: jax.scipy.linalg.cho_solve((L, True), r)
    x = solve(b)
    for _ in range(PROX_ITERS - 1):
        x = x + solve(b - A @ x)
    return x
