"""Composite-rigid-body algorithm (Featherstone 2008, Sec. 6.2, Table 6.2), written once for
one state and a batch-last chunk (as :mod:`jaxdyn.dynamics.aba`).

Composite inertias IC_i = I_i + sum over children c of Xup_c^T IC_c Xup_c by a leaves-to-root
sweep in body frames (Pinocchio's order of operations).  Then for every dof k of body i,
F_k = IC_i S_k, and M_ck = S_c^T X_(c<-i)^* F_k for every dof c at or above body i: the force
columns F and the motion columns S are taken to each tree's root body frame (never the world:
M does not depend on it, and a floating base far from the world origin would lose digits),
where the pairing S_c . F_k is formed only for the pairs (c, k) whose body of c is at or
above the body of k (the tree's sparsity, as Pinocchio's backward column sweep) and gathered
into M and its mirror.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import spatial as sp
from ..kinematics import joint_transforms, root_transforms
from ..kinematics.bodies import dof_columns
from ..model.model import Model
from ..model.parameters import body_inertias
from ..spatial.linalg import mm, tree_sum
from ..tree import PerRun, backward_sweep, same
from .common import inertia_init


def composite_step(IC, x, keep=same):
    """IC_i is complete when body i is reached; its parent receives Xup^T IC_i Xup.
    x = (E, r, ...).  Returns (Xup^T IC Xup, IC)."""
    E, r = x[:2]
    return sp.translate_congruence(r, keep(sp.rotate_congruence(E, IC))), IC


def dof_masks(model: Model):
    """(up, same) (nv, nv) numpy: up[c, k] = 1 when dof c's body is dof k's body or one of its
    ancestors, same[c, k] = 1 when it is the same body."""
    b = model.topology.dof_body
    up = model.topology.ancestors[b][:, b].T
    same_body = (b[:, None] == b[None, :]).astype(float)
    return up, same_body


def pair_values(x, y, cs, ks, dof_axis=1):
    """x_c . y_k, the sum over the components, for the index pairs (cs, ks) (numpy (P,)) only:
    x, y (m, n, ...) (dof_axis 1) or (n, m, ...) (dof_axis 0) -> (P, ...)."""
    xc, yk = jnp.take(x, cs, axis=dof_axis), jnp.take(y, ks, axis=dof_axis)
    part = lambda a, i: lax.index_in_dim(a, i, 1 - dof_axis, keepdims=False)
    return tree_sum([part(xc, i) * part(yk, i) for i in range(x.shape[1 - dof_axis])])


def gather_pairs(n, blocks):
    """(n, n, ...) from blocks (vals (P, ...), cs, ks, mirror) of values at disjoint index pairs:
    entry (c, k) of each pair, also (k, c) where ``mirror`` (numpy bool (P,)) holds; zero
    elsewhere (one gather)."""
    vals = [b[0] for b in blocks]
    vals = jnp.concatenate(vals + [jnp.zeros_like(vals[0][:1])], 0)
    idx = np.full((n, n), vals.shape[0] - 1)
    start = 0
    for _, cs, ks, mirror in blocks:
        p = start + np.arange(len(cs))
        idx[cs, ks] = p
        idx[ks[mirror], cs[mirror]] = p[mirror]
        start += len(cs)
    return vals[idx]


def mass_matrix_from(model: Model, J, W, dof_axis=0):
    """M (nv, nv, ...) from every dof's motion column J_k and composite-force column W_k, both
    in its tree's root frame, (nv, 6, ...) (dof_axis 0) or (6, nv, ...) (dof_axis 1):
    M_ck = J_c . W_k for c at or above k (only those pairs are formed), mirrored, plus the
    armature on the diagonal."""
    up, same_body = dof_masks(model)
    c, k = np.nonzero(up)
    M = gather_pairs(model.nv, [(pair_values(J, W, c, k, dof_axis), c, k, same_body[c, k] == 0)])
    arm = model.armature
    return M + jnp.eye(model.nv, dtype=M.dtype).reshape((model.nv, model.nv) + (1,) * (M.ndim - 2)) * arm[None]


def crba_passes(model: Model, q, keep=same):
    """M (nv, nv, ...) of one state or a batch-last chunk q (nq, ...)."""
    Xup, S = joint_transforms(model, q, keep)
    I = body_inertias(model)
    bs = jnp.broadcast_shapes(I.m.shape[1:], *(r.shape[2:] for r in Xup.r))
    _, IC = backward_sweep(composite_step, model, inertia_init(I, bs), (Xup.E, Xup.r, I), keep)
    F = PerRun(jax.vmap(mm)(ic, s) for ic, s in zip(IC, S))                 # IC_i S_i per body (n, 6, nv_t)
    Xr = root_transforms(model, Xup)
    W = dof_columns(model, Xr, F, force=True)
    J = dof_columns(model, Xr, S)
    return mass_matrix_from(model, J, W)

