"""Composite-rigid-body algorithm (seed 004 Fig. 7, eqs. 42-45), in world coordinates.

Composite inertias IC_i are accumulated leaves-to-root by ``backward_sweep`` with every body
inertia expressed in world axes, so the block of M for dofs of bodies i (descendant) and j
(ancestor or self) is ``S0_i^T IC0_i S0_j`` with S0 the world-frame motion subspaces.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp

from .. import spatial as sp
from ..kinematics import ancestors, joint_transforms, motion_subspaces_world, world_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep
from .common import body_inertias, dof_mask


def _crba_step(IC, x):
    """The composite inertia of body i goes to its parent unchanged (world axes)."""
    return IC, IC


def composite_inertias_world(model: Model, X0):
    """World-frame composite inertias IC0 (compact, leading axis nb)."""
    I = body_inertias(model)
    X = sp.Transform(X0.E[:-1], X0.r[:-1])
    I0 = jax.vmap(sp.inertia.transform_to_parent)(X, I)
    _, IC0 = backward_sweep(_crba_step, model, I0, None)
    return IC0, I0


@jax.jit
def crba(model: Model, q):
    """Joint-space inertia matrix M(q) (nv, nv), symmetric, armature on the diagonal."""
    check_state(model, q=q)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    IC0, _ = composite_inertias_world(model, X0)
    S0 = motion_subspaces_world(model, X0, S) * dof_mask(model)[:, None, :]
    F0 = jax.vmap(lambda I, Si: jax.vmap(lambda c: sp.inertia.apply(I, c), 1, 1)(Si))(IC0, S0)
    anc = ancestors(model)[:-1]                         # anc[i, j] = 1 if j is i or an ancestor of i
    nb, k = model.nb, model.k
    B = jnp.einsum("iak,jal->ikjl", F0, S0)             # B[i, :, j, :] = F0_i^T S0_j
    eye = jnp.eye(nb, dtype=B.dtype)
    low = B * (anc - eye)[:, None, :, None]
    dia = B * eye[:, None, :, None]
    idx = model.vidx.reshape(-1)
    n1 = model.nv + 1

    def put(blocks):
        return jnp.zeros((n1, n1), B.dtype).at[idx[:, None], idx[None, :]].add(
            blocks.reshape(nb * k, nb * k))[:-1, :-1]

    L = put(low)
    M = L + L.T + put(dia)
    return M + jnp.diag(model.armature)
