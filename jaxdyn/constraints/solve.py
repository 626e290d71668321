"""Shared linear algebra of the constrained solvers: a proximal least-norm solve and the
rank / conditioning diagnostic."""
from __future__ import annotations

import jax
import jax.numpy as jnp

PROX_ITERS = 4
"""Proximal iterations (fixed count: reverse-differentiable, no while loop)."""
RANK_TOL = 1e-9
"""Eigenvalues below RANK_TOL * max eigenvalue count as zero in the rank diagnostic."""


def diagnostics(A):
    """(numerical rank, condition number on the range) of a PSD matrix A."""
    lam = jnp.linalg.eigvalsh(0.5 * (A + A.T))
    top = jnp.maximum(lam[-1], jnp.finfo(A.dtype).tiny)
    keep = lam > RANK_TOL * top
    rank = jnp.sum(keep)
    low = jnp.min(jnp.where(keep, lam, top))
    return rank, top / low


def prox_solve(A, b, eps):
    """Least-norm solution of A x = b for PSD A (m, m) by proximal iterations (see :mod:`jaxdyn.constraints.dynamics`)."""
    m = A.shape[0]
    Ar = A + eps * jnp.eye(m, dtype=A.dtype)
    L = jnp.linalg.cholesky(Ar)
    solve = lambda r: jax.scipy.linalg.cho_solve((L, True), r)
    x = solve(b)
    for _ in range(PROX_ITERS - 1):
        x = x + solve(b - A @ x)
    return x
