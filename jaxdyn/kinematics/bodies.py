"""Body kinematics: joint transforms, world (and root) transforms of every body, motion
subspace columns in world coordinates, body velocities and accelerations, forward kinematics.
Spatial vectors angular-first (Featherstone), body coordinates unless named.

Arrays are body-first then component-first, with optional trailing batch axes (one state:
E (nb, 3, 3); a batch-last chunk: E (nb, 3, 3, C)), so the same functions serve
:mod:`jaxdyn.batching`."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Configuration
from .. import spatial as sp
from ..model.joints import jcalc
from ..model.model import Model, check_state
from ..tree import PerRun, forward_sweep, same

bodywise = jax.vmap
"""Map a component-first function over the leading body axis."""


def joint_transforms(model: Model, q, keep=same):
    """Xup (parent -> body: a Transform of :class:`jaxdyn.tree.PerRun` s, entry j of E
    (run.n, 3, 3, ...) and of r (run.n, 3, ...)) and S, the motion subspaces (a PerRun,
    entry j (run.n, 6, run.nv, ...)), at q (nq, ...).  Each joint type's transforms are
    computed for all its bodies at once (:func:`jaxdyn.model.joints.jcalc`).  ``bodies(Xup)``
    gives the per-body arrays (nb, 3, 3, ...), (nb, 3, ...).  ``keep``: as in
    :mod:`jaxdyn.tree`."""
    t = model.topology
    by_nv = {}                                  # dof count -> the groups' (E, r, S), in group order
    for g in t.joint_groups:
        b = np.asarray(g.bodies)
        qj = take(q, np.asarray(g.qidx, int).reshape(len(b), -1))
        EJ, rJ, S = jcalc(g.jtype, take(model.axis, b), take(model.pitch, b), qj, keep)
        X = bodywise(sp.compose)(sp.Transform(EJ, rJ), sp.Transform(take(model.Xtree_E, b), take(model.Xtree_r, b)))
        by_nv.setdefault(S.shape[2], []).append((X.E, X.r, S))
    by_nv = {k: [jnp.concatenate(a) if len(a) > 1 else a[0] for a in zip(*v)] for k, v in by_nv.items()}
    E, r, S = [], [], []
    for run in model.runs:
        pos = t.group_position[run.start:run.stop]
        E.append(take(by_nv[run.nv][0], pos)), r.append(take(by_nv[run.nv][1], pos)), S.append(take(by_nv[run.nv][2], pos))
    return sp.Transform(PerRun(E), PerRun(r)), PerRun(S)


def take(x, idx):
    """x[idx] along axis 0 for a constant numpy index array ``idx`` (any shape): slices where
    the indices run contiguously."""
    flat = np.asarray(idx, int).reshape(-1)
    if flat.size == 0:
        return jnp.zeros(np.shape(idx) + x.shape[1:], x.dtype)
    cut = np.flatnonzero(np.diff(flat) != 1) + 1
    if len(cut) >= 8:
        return x[idx]
    parts = [x[int(a[0]):int(a[0]) + len(a)] for a in np.split(flat, cut)]
    out = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    return out.reshape(np.shape(idx) + x.shape[1:])


def bodies(X):
    """A Transform of :class:`jaxdyn.tree.PerRun` s (:func:`joint_transforms`) as per-body
    arrays E (nb, 3, 3, ...), r (nb, 3, ...); per-body arrays pass through."""
    if not isinstance(X.E, PerRun):
        return X
    if not len(X.E):
        return sp.Transform(jnp.zeros((0, 3, 3)), jnp.zeros((0, 3)))
    return sp.Transform(X.E.bodies(), X.r.bodies())


def _identity_like(r):
    """Identity E (3, 3, ...) and zero r (3, ...) shaped like one body's r (3, ...)."""
    eye = jnp.eye(3, dtype=r.dtype).reshape((3, 3) + (1,) * (r.ndim - 1))
    return jnp.broadcast_to(eye, (3, 3) + r.shape[1:]), jnp.zeros_like(r)


def world_transforms(model: Model, Xup, roots_at_identity=False):
    """0 -> body Transforms (leading axis nb + 1; slot nb: the world's identity) from Xup, by
    pointer jumping: every body holds the transform from some ancestor a_i's frame (first its
    parent's) and takes over a_i's, X_i <- X_i X_(a_i), a_i <- a_(a_i), until every a_i is the
    world: ceil(log2 depth) steps on all bodies at once instead of nb sequential steps.
    ``roots_at_identity``: each tree's root joint taken as the identity, i.e. the transforms
    from each tree's root body frame (:func:`root_transforms`)."""
    nb = model.nb
    E, r = bodies(Xup)
    if roots_at_identity and nb:
        root = (model.parent < 0).reshape((nb,) + (1,) * (E.ndim - 1))
        I, z = _identity_like(r[0])
        E, r = jnp.where(root, I[None], E), jnp.where(root[:, 0], z[None], r)
    I, z = _identity_like(r[0] if nb else jnp.zeros((3,) + r.shape[2:], r.dtype))
    E, r = jnp.concatenate([E, I[None]]), jnp.concatenate([r, z[None]])
    a = np.concatenate([np.where(model.parent < 0, nb, model.parent), [nb]])
    while np.any(a < nb):
        X = bodywise(sp.compose)(sp.Transform(E, r), sp.Transform(E[a], r[a]))
        E, r, a = X.E, X.r, a[a]
    return sp.Transform(E, r)


def root_transforms(model: Model, Xup):
    """body -> its tree's root body frame Transforms, leading axis nb + 1 (slot nb: identity):
    :func:`world_transforms` with every root joint taken as the identity, so no quantity
    depends on where the robot is in the world (a floating base 1000 km from the origin loses
    no digits)."""
    return world_transforms(model, Xup, roots_at_identity=True)


@jax.jit
def forward_kinematics(model: Model, q: Configuration):
    """World placements of all bodies: R (nb, 3, 3) body->world rotations, p (nb, 3) origins."""
    check_state(model, q=q)
    X0 = world_transforms(model, joint_transforms(model, q)[0])
    return jnp.swapaxes(X0.E[:-1], -1, -2), X0.r[:-1]


def ancestors(model: Model) -> np.ndarray:
    """(nb, nb) 0/1 numpy matrix: row i marks body i and its ancestors."""
    return model.topology.ancestors


def dof_columns(model: Model, X, S, force=False):
    """Per-joint columns S (a :class:`jaxdyn.tree.PerRun` of (n, 6, nv_t, ...), e.g. the motion
    subspaces) in the frame that ``X`` (leading axis nb or nb + 1: that frame -> body) maps
    from, one row per dof: (nv, 6, ...).  Motion vectors (X^-1 s), or force vectors (X^T s)
    with ``force``."""
    move = sp.apply_force_T if force else sp.apply_motion_inv
    cols = []
    for run, Sr in zip(model.runs, S):
        Xr = sp.Transform(X.E[run.start:run.stop], X.r[run.start:run.stop])                # X: per-body arrays
        Ji = bodywise(lambda Xi, Si: jax.vmap(lambda c: move(Xi, c), 1, 0)(Si))(Xr, Sr)
        cols.append(Ji.reshape((-1,) + Ji.shape[2:]))          # (n, nv_t, 6, ...) -> (n nv_t, 6, ...)
    if not cols:
        return jnp.zeros((0, 6) + X.r.shape[2:], X.r.dtype)
    return jnp.concatenate(cols, 0)


def body_velocities(model: Model, q, qd, qdd=None, a0=None):
    """Spatial velocity and acceleration of every body in body coordinates (angular-first):
    v, a (nb + 1, 6) with slot nb = world (a[nb] = a0, default 0); also returns Xup and S."""
    Xup, S = joint_transforms(model, q)
    dt = q.dtype
    from ..tree import per_run
    qdd = jnp.zeros_like(qd) if qdd is None else qdd
    a0 = jnp.zeros(6, dt) if a0 is None else a0

    def step(pa, x, keep=None):
        v_p, a_p = pa
        E, r, Si, qdi, qddi = x
        X = sp.Transform(E, r)
        vJ = sp.linalg.mv(Si, qdi)
        v = sp.apply_motion(X, v_p) + vJ
        a = sp.apply_motion(X, a_p) + sp.linalg.mv(Si, qddi) + sp.cross_motion(v, vJ)
        return (v, a), None

    (v, a), _ = forward_sweep(step, model, (jnp.zeros(6, dt), a0), (Xup.E, Xup.r, S, per_run(model, qd),
                                                                     per_run(model, qdd)))
    Xup = bodies(Xup)
    return v, a, Xup, S
