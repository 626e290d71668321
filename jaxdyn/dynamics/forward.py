"""Forward dynamics by CRBA and Cholesky (Featherstone 2008, Sec. 6.2): qdd = M^-1 (tau - h),
with one Cholesky factorization per tree of the model (M is block diagonal over trees), so a
tree whose block of M is singular gets NaN on its own dofs only, as with ABA."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from .crba import crba_passes
from .rnea import rnea_passes


def tree_dof_masks(model: Model) -> np.ndarray:
    """(T, nv) 0/1: row t marks the dofs of the t-th tree that has dofs (a root body and the
    bodies below it)."""
    t = model.topology
    roots = t.roots[t.dof_body]
    return np.stack([(roots == r).astype(float) for r in np.unique(roots)]) if model.nv else np.zeros((0, 0))


def tree_solve(M, b, masks):
    """x = M^-1 b for M (nv, nv) block diagonal over the trees ``masks`` (T, nv) and b (nv,) or
    (nv, k) (k right sides): one Cholesky factorization per tree; a block that is not
    positive definite gives NaN on its dofs."""
    cho_solve = jax.scipy.linalg.cho_solve
    if b.ndim == 2 and masks.shape[0] > 1:
        return jax.vmap(lambda c: tree_solve(M, c, masks), 1, 1)(b)
    if masks.shape[0] == 1:
        return cho_solve((jnp.linalg.cholesky(M), True), b)
    inside = masks[:, :, None] * masks[:, None, :] > 0
    Mt = jnp.where(inside, M[None], 0.0) + np.eye(M.shape[0])[None] * (1.0 - masks)[:, None, :]   # (T, nv, nv)
    x = cho_solve((jnp.linalg.cholesky(Mt), True), jnp.where(masks > 0, b[None], 0.0)[..., None])[..., 0]
    return jnp.where(masks > 0, x, 0.0).sum(0)


def crba_forward_dynamics(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """qdd (nv,) = M^-1 (tau - h) of one state: M by CRBA, h by RNEA at qdd = 0."""
    M = crba_passes(model, q)
    h = rnea_passes(model, q, qd, jnp.zeros_like(qd), f_ext, gravity, f_ext_frame)[0]
    return tree_solve(M, tau - h, tree_dof_masks(model))
