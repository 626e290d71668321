"""Composite-rigid-body algorithm (Featherstone 2008, Sec. 6.2), in one common frame per tree.

Composite inertias IC_i are accumulated leaves-to-root by ``backward_sweep`` with every body
inertia expressed in one frame, so the block of M for dofs of bodies i (descendant) and j
(ancestor or self) is ``S0_i^T IC0_i S0_j`` with S0 the motion subspaces in that frame.  The
common frame is the root body's frame of each tree (:func:`jaxdyn.kinematics.root_transforms`),
not the world: M does not depend on it, and world coordinates would carry m |p|^2 terms that
cancel catastrophically for a floating base far from the origin (relative error 1e-4 at
1000 km in world coordinates, round-off in root coordinates).

That sweep is :func:`crba_sweep`.  :func:`crba` computes the same sums in closed form (products
with the ancestry matrix): for one state with every composite inertia about its subtree's
centre of mass (:func:`jaxdyn.dynamics.closed_form.mass_matrix`, which keeps the small
entries of light links far from the root to their own round-off), and through a
``custom_vmap`` rule for batch-last chunks of states
(:func:`jaxdyn.dynamics.derivative_sweeps.crba_terms`, composites about the root origin).
"""
from __future__ import annotations


from functools import partial

import jax
import jax.numpy as jnp

from .._typing import Configuration, JointMatrix
from .. import spatial as sp
from ..kinematics import ancestors, joint_transforms, motion_subspaces_world, root_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep
from . import closed_form, derivative_sweeps as ds
from .chunks import default_chunk, map_chunks
from .common import (batched_over_states, body_inertias, dof_ancestry, dof_mask, dof_owner, materialize,
                     with_zero_body)
from ..compiled import cpu_jit


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


@cpu_jit
def crba(model: Model, q: Configuration) -> JointMatrix:
    """Joint-space inertia matrix M(q) (nv, nv), symmetric, armature on the diagonal.

    One state: the composite inertias about the subtrees' centres of mass as products with
    the ancestry matrix, the root transforms by pointer jumping
    (:func:`jaxdyn.dynamics.closed_form.mass_matrix`, the M that one state of
    :func:`jaxdyn.aba` solves with).  ``jax.vmap(crba)`` over states of one model runs the
    root-frame terms on batch-last chunks (:func:`crba_batch`, a ``custom_vmap`` rule); over
    a batched model (``jaxdyn.stack``) the vmapped sweep (:func:`crba_sweep`).  Derivatives differentiate :func:`crba_sweep` (a
    ``custom_jvp`` rule)."""
    check_state(model, q=q)
    return _crba(model, q)


def crba_batch(model: Model, q, chunk=None):
    """M of B states of one model, q (B, nq) -> (B, nv, nv), in batch-last chunks of ``chunk``
    states (default 32 on the CPU, :func:`jaxdyn.dynamics.chunks.default_chunk`):
    :func:`jaxdyn.dynamics.derivative_sweeps.crba_terms` with fusion barriers, the topology
    computed once.  What ``jax.vmap(crba)`` runs."""
    topo = ds.topology(model)

    def run(i, qc):
        M = ds.crba_terms(model, *ds.state_transforms(model, qc), keep=partial(materialize, i=i), topo=topo)
        return jnp.moveaxis(M, -1, 0)

    return map_chunks(run, q, default_chunk(chunk, 32, "matrices"))


def crba_sweep(model: Model, q: Configuration) -> JointMatrix:
    """:func:`crba` by a leaves-to-root sweep of composite inertias (the reference the closed
    form is tested against, and what derivatives of :func:`crba` differentiate)."""
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


_crba = batched_over_states(closed_form.mass_matrix, crba_batch, crba_sweep)
"""M of one state in closed form, ``jax.vmap`` over states on batch-last chunks, derivatives and a
batched model through :func:`crba_sweep`."""
