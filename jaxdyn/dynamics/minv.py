"""M(q)^-1 by ABA's factorization: the tau-linear passes 2b and 3 on every unit vector, O(n nv)
(Featherstone 2008, Sec. 7.3).  A tree with a singular pivot (a massless leaf on a joint) gives
NaN on its own rows and columns."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..kinematics import joint_transforms
from ..model.model import Model
from ..tree import same
from .aba import aba_factor, aba_solve
from .forward import tree_dof_masks, tree_solve
from .crba import crba_passes


def minv_aba(model: Model, q, keep=same):
    """M^-1 (nv, nv, ...), symmetrized, of one state or a batch-last chunk q (nq, ...)."""
    Xup, S = joint_transforms(model, q, keep)
    fac = aba_factor(model, Xup, S, keep)
    bs, nv, dt = q.shape[1:], model.nv, q.dtype
    zb, z6 = jnp.zeros((model.nb, 6) + bs, dt), jnp.zeros((6,) + bs, dt)
    eye = jnp.eye(nv, dtype=dt).reshape((nv, nv) + (1,) * len(bs))
    cols = jax.vmap(lambda e: aba_solve(model, fac, zb, zb, jnp.broadcast_to(e, (nv,) + bs), z6, keep))(eye)
    return 0.5 * (cols + jnp.swapaxes(cols, 0, 1))


def minv_cholesky(model: Model, q):
    """M^-1 (nv, nv) of one state by CRBA and one Cholesky factorization per tree."""
    M = crba_passes(model, q)
    Mi = jax.vmap(lambda e: tree_solve(M, e, tree_dof_masks(model)), out_axes=1)(jnp.eye(model.nv, dtype=M.dtype))
    return 0.5 * (Mi + Mi.T)
