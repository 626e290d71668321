"""Body kinematics: joint transforms, world (and root) transforms of every body, the ancestor
relation, motion subspaces in world coordinates, body velocities and accelerations, forward
kinematics.  Spatial vectors angular-first (Featherstone), body coordinates unless named."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Configuration
from .. import spatial as sp
from ..model.configuration import gather
from ..model.joints import in_elementwise_products, jcalc
from ..model.model import Model, array_module, check_state, tree_arrays
from ..tree import forward_sweep
from ..compiled import cpu_jit


def joint_transforms(model: Model, q, bodies=slice(None), types=None, k=None):
    """Per-body Xup (parent -> body Transform, leading axis nb) and S (nb, 6, k).

    ``bodies`` (a slice), ``types`` and ``k`` (static) restrict the computation to some
    bodies whose joints are all of the listed types, with k columns of S (defaults: all
    bodies, ``model.types``, ``model.k``)."""
    types = model.types if types is None else types
    k = model.k if k is None else k
    qj = gather(q, model.qidx[bodies])

    def one(t, axis, pitch, qq, E, r):
        XJ, S = jcalc(types, k, t, axis, pitch, qq)
        if in_elementwise_products():    # E_J E_tree as a broadcast-multiply-sum, not a batched dot
            XJ = sp.Transform(sum(XJ.E[:, j, None] * E[None, j] for j in range(3)), XJ.r)
            return sp.Transform(XJ.E, r + sum(E[j] * XJ.r[j] for j in range(3))), S
        return sp.compose(XJ, sp.Transform(E, r)), S

    return jax.vmap(one)(model.jtype[bodies], model.axis[bodies], model.pitch[bodies], qj,
                         model.Xtree_E[bodies], model.Xtree_r[bodies])


def _fk_step(X0_parent, Xup):
    X = sp.compose(Xup, X0_parent)
    return X, None


def _identity_like(Xup):
    """The identity transform shaped like one body's entry of Xup (E (3, 3, ...), r (3, ...))."""
    I = sp.identity(Xup.r.dtype)
    return sp.Transform(jnp.broadcast_to(I.E.reshape((3, 3) + (1,) * (Xup.E.ndim - 3)), Xup.E.shape[1:]),
                        jnp.zeros(Xup.r.shape[1:], Xup.r.dtype))


def world_transforms(model: Model, Xup, keep=None):
    """0->body Transforms with leading axis nb + 1 (slot nb = world identity).  Xup: E
    (nb, 3, 3, ...), r (nb, 3, ...): one state, or batch-last stacks of states of one
    model, by pointer jumping (:func:`_by_pointer_jumping`); ``keep`` (batch-last: a fusion
    barrier, see :mod:`jaxdyn.dynamics.batch`) is applied after each of its steps.  Stacks
    of models with a parent per lane (``jaxdyn.stack`` in the lanes kernels) by a sweep."""
    if jnp.ndim(model.parent) == 1:
        return _by_pointer_jumping(model, Xup, keep)
    X0, _ = forward_sweep(_fk_step, model, _identity_like(Xup), Xup)
    return X0


def root_transforms(model: Model, Xup, keep=None):
    """body -> its tree's root body frame Transforms, leading axis nb + 1 (slot nb: identity).

    As :func:`world_transforms` with every root joint (parent = -1) taken as the identity:
    each subtree is expressed in its root body's frame, so no quantity depends on where the
    robot is in the world (a floating base 1000 km from the origin loses no digits).
    """
    root = (model.parent < 0).reshape((-1,) + (1,) * (Xup.E.ndim - 1))
    I = _identity_like(Xup)
    Xl = sp.Transform(jnp.where(root, I.E[None], Xup.E), jnp.where(root[:, 0], I.r[None], Xup.r))
    return world_transforms(model, Xl, keep)


def _by_pointer_jumping(model: Model, Xup, keep=None):
    """:func:`world_transforms` (E (nb, 3, 3, ...), r (nb, 3, ...)) by pointer jumping:
    every body holds the transform from some ancestor a_i's frame (first its parent's) and
    takes over a_i's, X_i <- X_i X_(a_i), a_i <- a_(a_i), until every a_i is the world:
    ceil(log2 depth) steps on all bodies at once (a static topology) or ceil(log2 nb) (a
    traced one), instead of nb sequential steps, which cost more time than their arithmetic
    (one state: latency; a batch-last chunk: a few kernels instead of a scan step's per body).
    ``keep`` after each step (None: none)."""
    nb = model.nb
    parent, _ = tree_arrays(model)
    xp = array_module(parent)
    a = xp.concatenate([xp.where(parent < 0, nb, parent), xp.full((1,), nb, parent.dtype)])
    steps = max(nb - 1, 1).bit_length()
    if xp is np:                                   # known depth: stop when all point at the world
        steps, b = 0, a
        while np.any(b < nb):
            steps, b = steps + 1, b[b]
    I = _identity_like(Xup)
    keep = (lambda x: x) if keep is None else keep
    E = jnp.moveaxis(jnp.concatenate([Xup.E, I.E[None]]), 0, 2)       # (3, 3, nb + 1, ...): component-first
    r = jnp.moveaxis(jnp.concatenate([Xup.r, I.r[None]]), 0, 1)       # (3, nb + 1, ...)
    for _ in range(steps):
        X = sp.compose(sp.Transform(E, r), sp.Transform(E[:, :, a], r[:, a]))
        (E, r), a = keep((X.E, X.r)), a[a]
    return sp.Transform(jnp.moveaxis(E, 2, 0), jnp.moveaxis(r, 1, 0))


@cpu_jit
def forward_kinematics(model: Model, q: Configuration):
    """World placements of all bodies: R (nb, 3, 3) body->world rotations, p (nb, 3) origins."""
    check_state(model, q=q)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    return jnp.swapaxes(X0.E[:-1], -1, -2), X0.r[:-1]


def ancestors(model: Model):
    """(nb + 1, nb) 0/1 matrix: row i marks body i and its ancestors (row nb = world: none).

    The reflexive-transitive closure of the parent relation by repeated squaring,
    R <- min(R R, 1) from R = 1 + P (P[i, parent(i)] = 1): ceil(log2 nb) small matrix products
    instead of a sweep over the bodies (lower latency for one state).  A numpy array when the
    topology is static (:func:`jaxdyn.model.model.tree_arrays`: a constant of the compiled
    program), else a traced one; index it with traced indices through ``jnp.asarray``."""
    nb = model.nb
    dt = model.Xtree_r.dtype
    parent, _ = tree_arrays(model)
    xp = array_module(parent)                    # numpy (a constant) when the topology is static
    R = xp.eye(nb, dtype=dt) + (parent[:, None] == xp.arange(nb, dtype=parent.dtype)[None, :]).astype(dt)
    for _ in range(max(nb - 1, 1).bit_length()):
        R = xp.minimum(R @ R, 1.0)
    return xp.concatenate([R, xp.zeros((1, nb), dt)])


def motion_subspaces_world(model: Model, X0, S):
    """S of every body in world coordinates (world origin): (nb, 6, k)."""
    X = sp.Transform(X0.E[:-1], X0.r[:-1])
    return jax.vmap(lambda Xi, Si: jax.vmap(lambda c: sp.apply_motion_inv(Xi, c), 1, 1)(Si))(X, S)


def body_velocities(model: Model, q, qd, qdd=None, a0=None):
    """Spatial velocity and acceleration of every body in body coordinates (angular-first).

    Returns v, a: (nb + 1, 6) with slot nb = world (a[nb] = a0, default 0).
    """
    Xup, S = joint_transforms(model, q)
    dt = Xup.r.dtype
    qdj = gather(qd, model.vidx)
    qddj = gather(jnp.zeros_like(qd) if qdd is None else qdd, model.vidx)
    a0 = jnp.zeros(6, dt) if a0 is None else a0

    def step(pa, x):
        v_p, a_p = pa
        X, Si, qdi, qddi = x
        vJ = Si @ qdi
        v = sp.apply_motion(X, v_p) + vJ
        a = sp.apply_motion(X, a_p) + Si @ qddi + sp.cross_motion(v, vJ)
        return (v, a), None

    (v, a), _ = forward_sweep(step, model, (jnp.zeros(6, dt), a0), (Xup, S, qdj, qddj))
    return v, a, Xup, S
