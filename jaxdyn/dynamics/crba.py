"""Composite-rigid-body algorithm (Featherstone 2008, Sec. 6.2), in one common frame per tree.

Composite inertias IC_i are accumulated leaves-to-root by ``backward_sweep`` with every body
inertia expressed in one frame, so the block of M for dofs of bodies i (descendant) and j
(ancestor or self) is ``S0_i^T IC0_i S0_j`` with S0 the motion subspaces in that frame.  The
common frame is the root body's frame of each tree (:func:`jaxdyn.kinematics.root_transforms`),
not the world: M does not depend on it, and world coordinates would carry m |p|^2 terms that
cancel catastrophically for a floating base far from the origin (relative error 1e-4 at
1000 km in world coordinates, round-off in root coordinates).
"""
from __future__ import annotations


import jax
import jax.numpy as jnp

from .._typing import Configuration, JointMatrix
from .. import spatial as sp
from ..kinematics import ancestors, joint_transforms, motion_subspaces_world, root_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep
from .common import body_inertias, dof_ancestry, dof_mask, dof_owner, with_zero_body


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
def crba(model: Model, q: Configuration) -> JointMatrix:
    """Joint-space inertia matrix M(q) (nv, nv), symmetric, armature on the diagonal."""
    check_state(model, q=q)
    Xup, S = joint_transforms(model, q)
    X0 = root_transforms(model, Xup)
    IC0, _ = composite_inertias_world(model, X0)
    S0 = motion_subspaces_world(model, X0, S) * dof_mask(model)[:, None, :]
    F0 = jax.vmap(lambda I, Si: jax.vmap(lambda c: sp.inertia.apply(I, c), 1, 1)(Si))(IC0, S0)
    # per dof: its column of F0 and S0 and its body (a gather through the inverse of vidx;
    # dofs that no body owns -- stack() padding -- read a zero column and the world's row)
    body, col = dof_owner(model)
    Fd, Sd = (with_zero_body(X)[body, :, col] for X in (F0, S0))          # (nv, 6)
    anc, same = dof_ancestry(model, ancestors(model), body)              # anc[a, b]: b's body is a's or above
    Bd = Fd @ Sd.T                                                       # F0_a^T S0_b for dofs a, b
    low = Bd * (anc - same)
    M = low + low.T + Bd * same
    return M + jnp.diag(model.armature)
