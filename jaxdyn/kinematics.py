"""Kinematics: joint transforms, forward kinematics, frames, Jacobians, accelerations, IK.

Internal spatial vectors are angular-first (Featherstone).  Public frame velocities,
accelerations and Jacobians use Pinocchio's convention: rows ``[linear; angular]`` and
``reference`` = "world" (world axes, world origin), "local" (frame axes and origin) or
"local_world_aligned" (frame origin, world axes).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._typing import Configuration, Tangent
from . import spatial as sp
from .model.configuration import gather
from .model.joints import jcalc
from .model.model import Model, array_module, check_state, tree_arrays
from .tree import forward_sweep
from .compiled import cpu_jit

REFERENCES = ("world", "local", "local_world_aligned")


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


def world_transforms(model: Model, Xup):
    """0->body Transforms with leading axis nb + 1 (slot nb = world identity).  Xup: E
    (nb, 3, 3, ...), r (nb, 3, ...) (one state, by pointer jumping, or batch-last stacks, by
    a sweep)."""
    if Xup.E.ndim == 3:
        return _by_pointer_jumping(model, Xup)
    X0, _ = forward_sweep(_fk_step, model, _identity_like(Xup), Xup)
    return X0


def root_transforms(model: Model, Xup):
    """body -> its tree's root body frame Transforms, leading axis nb + 1 (slot nb: identity).

    As :func:`world_transforms` with every root joint (parent = -1) taken as the identity:
    each subtree is expressed in its root body's frame, so no quantity depends on where the
    robot is in the world (a floating base 1000 km from the origin loses no digits).
    """
    root = (model.parent < 0).reshape((-1,) + (1,) * (Xup.E.ndim - 1))
    I = _identity_like(Xup)
    Xl = sp.Transform(jnp.where(root, I.E[None], Xup.E), jnp.where(root[:, 0], I.r[None], Xup.r))
    return world_transforms(model, Xl)


def _by_pointer_jumping(model: Model, Xup):
    """:func:`world_transforms` of one state (E (nb, 3, 3), r (nb, 3)) by pointer jumping:
    every body holds the transform from some ancestor a_i's frame (first its parent's) and
    takes over a_i's, X_i <- X_i X_(a_i), a_i <- a_(a_i), until every a_i is the world:
    ceil(log2 depth) steps on all bodies at once (a static topology) or ceil(log2 nb) (a
    traced one), instead of nb sequential steps, which cost one state more time than their
    arithmetic."""
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
    E = jnp.moveaxis(jnp.concatenate([Xup.E, I.E[None]]), 0, -1)      # (3, 3, nb + 1): component-first
    r = jnp.moveaxis(jnp.concatenate([Xup.r, I.r[None]]), 0, -1)      # (3, nb + 1)
    for _ in range(steps):
        X = sp.compose(sp.Transform(E, r), sp.Transform(E[..., a], r[..., a]))
        E, r, a = X.E, X.r, a[a]
    return sp.Transform(jnp.moveaxis(E, -1, 0), jnp.moveaxis(r, -1, 0))


@cpu_jit
def forward_kinematics(model: Model, q: Configuration):
    """World placements of all bodies: R (nb, 3, 3) body->world rotations, p (nb, 3) origins."""
    check_state(model, q=q)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    return jnp.swapaxes(X0.E[:-1], -1, -2), X0.r[:-1]


def frame_index(model, name_or_id):
    """Frame index: names are resolved in Python, integers (possibly traced) pass through."""
    return model.frame_id(name_or_id) if isinstance(name_or_id, str) else name_or_id


def _by_index(fn):
    """Public wrapper: resolve a frame name to an index *before* jit, so one compiled
    program serves every frame of a model (names stay out of the jit cache key)."""
    import functools

    import inspect
    statics = ("reference",) if "reference" in inspect.signature(fn).parameters else ()
    jitted = cpu_jit(fn, static_argnames=statics)

    pos = list(inspect.signature(fn).parameters).index("name") - 1

    @functools.wraps(fn)
    def wrapper(model, *args, **kw):
        args = list(args)
        if "name" in kw:
            kw["name"] = jnp.asarray(frame_index(model, kw["name"]), jnp.int32)
        else:
            args[pos] = jnp.asarray(frame_index(model, args[pos]), jnp.int32)
        return jitted(model, *args, **kw)

    return wrapper


def frame_X0(model, X0, fid):
    """0 -> frame Transform of frame fid, given 0->body transforms X0 (nb+1)."""
    b = jnp.where(model.frame_body[fid] < 0, model.nb, model.frame_body[fid])
    Xb = sp.Transform(X0.E[b], X0.r[b])
    return sp.compose(sp.Transform(model.frame_E[fid], model.frame_r[fid]), Xb), b


def frame_pose(model: Model, q: Configuration, name):
    """World pose of a named frame: (R (3, 3) frame->world rotation, p (3,) origin)."""
    check_state(model, q=q)
    fid = frame_index(model, name)
    Xup, _ = joint_transforms(model, q)
    Xf, _ = frame_X0(model, world_transforms(model, Xup), fid)
    return Xf.E.T, Xf.r


@cpu_jit
def frame_poses(model: Model, q):
    """World poses of all frames: R (nf, 3, 3), p (nf, 3)."""
    check_state(model, q=q)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    Xf, _ = jax.vmap(lambda i: frame_X0(model, X0, i))(jnp.arange(model.frame_body.shape[0]))
    return jnp.swapaxes(Xf.E, -1, -2), Xf.r


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


def _scatter_cols(model: Model, blocks):
    """blocks (nb, 6, k) -> (6, nv), summing columns into their dof index."""
    out = jnp.zeros((6, model.nv + 1), blocks.dtype)
    cols = jnp.transpose(blocks, (1, 0, 2)).reshape(6, -1)
    return out.at[:, model.vidx.reshape(-1)].add(cols)[:, :-1]


def to_pin_order(m6):
    """Angular-first (6, ...) -> Pinocchio's linear-first."""
    return jnp.concatenate([m6[3:], m6[:3]], 0)


def change_reference(J0, Xf, reference):
    """World-frame motion quantity (6, n) (angular-first) -> reference frame."""
    if reference == "world":
        return J0
    if reference == "local":
        return jax.vmap(lambda c: sp.apply_motion(Xf, c), 1, 1)(J0)
    if reference == "local_world_aligned":
        return jax.vmap(lambda c: sp.apply_motion(sp.xlt(Xf.r), c), 1, 1)(J0)
    raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")


def frame_jacobian(model: Model, q: Configuration, name, reference="world"):
    """Jacobian (6, nv) of a named frame, rows [linear; angular] (Pinocchio's getFrameJacobian)."""
    check_state(model, q=q)
    fid = frame_index(model, name)
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    Xf, b = frame_X0(model, X0, fid)
    mask = jnp.asarray(ancestors(model))[b]
    S0 = motion_subspaces_world(model, X0, S) * mask[:, None, None]
    J0 = _scatter_cols(model, S0)
    return to_pin_order(change_reference(J0, Xf, reference))


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


def _frame_motion(model, q, qd, qdd, name, reference, which):
    """Frame velocity ("v"), spatial acceleration ("a") or both ("va"), from one sweep."""
    fid = frame_index(model, name)
    v, a, Xup, S = body_velocities(model, q, qd, qdd)
    X0 = world_transforms(model, Xup)
    Xf, b = frame_X0(model, X0, fid)
    Xb = sp.Transform(X0.E[b], X0.r[b])
    motions = {"v": (v,), "a": (a,), "va": (v, a)}[which]
    out = tuple(_body_motion_in(Xb, Xf, m[b], reference) for m in motions)
    return out if which == "va" else out[0]


def _body_motion_in(Xb, Xf, m_body, reference):
    """A body-coordinates motion vector (6,) of the frame's body -> the frame's [linear; angular]
    in ``reference`` (world -> body Xb, world -> frame Xf)."""
    m0 = sp.apply_motion_inv(Xb, m_body)
    return to_pin_order(change_reference(m0[:, None], Xf, reference)[:, 0])


def _classical(v, a):
    """Classical acceleration [linear; angular] of a frame origin from its spatial velocity v and
    acceleration a (same reference, rows [linear; angular]): a + [omega x v_linear; 0]."""
    return a.at[:3].add(jnp.cross(v[3:], v[:3]))


class FrameTerms(NamedTuple):
    """Kinematics of F frames from one pass (:func:`frame_terms`); leading axis F, rows
    [linear; angular] in the requested reference."""
    R: jax.Array      # (F, 3, 3) frame -> world rotations
    p: jax.Array      # (F, 3) world positions of the frame origins
    J: jax.Array      # (F, 6, nv) frame Jacobians
    v: jax.Array      # (F, 6) frame velocities (None without qd)
    a: jax.Array      # (F, 6) classical accelerations at qdd = 0, J-dot qd + omega x v (None without qd)


def frame_terms(model: Model, q, qd, fids, reference="local_world_aligned") -> FrameTerms:
    """Pose, Jacobian, velocity and classical bias acceleration of the frames ``fids`` (F,
    indices) from one joint-transform, world-transform and velocity pass shared by all of them
    (each of :func:`frame_pose`, :func:`frame_jacobian`, :func:`frame_velocity` and
    :func:`frame_classical_acceleration` repeats those passes).  Equals those functions at
    ``qdd = 0``; ``qd=None`` skips the velocity pass (v, a None)."""
    if qd is None:
        Xup, S = joint_transforms(model, q)
        v = a = None
    else:
        v, a, Xup, S = body_velocities(model, q, qd)
    X0 = world_transforms(model, Xup)
    S0 = motion_subspaces_world(model, X0, S)
    anc = jnp.asarray(ancestors(model))

    def one(fid):
        Xf, b = frame_X0(model, X0, fid)
        J = to_pin_order(change_reference(_scatter_cols(model, S0 * anc[b][:, None, None]), Xf, reference))
        if v is None:
            return Xf.E.T, Xf.r, J, None, None
        Xb = sp.Transform(X0.E[b], X0.r[b])
        vf, af = (_body_motion_in(Xb, Xf, m[b], reference) for m in (v, a))
        return Xf.E.T, Xf.r, J, vf, _classical(vf, af)

    return FrameTerms(*jax.vmap(one)(jnp.asarray(fids, jnp.int32)))


def frame_velocity(model: Model, q: Configuration, qd: Tangent, name, reference="local"):
    """Spatial velocity (6,) [linear; angular] of a frame (Pinocchio's getFrameVelocity)."""
    check_state(model, q=q, qd=qd)
    return _frame_motion(model, q, qd, None, name, reference, "v")


def frame_acceleration(model: Model, q, qd, qdd, name, reference="local"):
    """Spatial acceleration (6,) [linear; angular] (Pinocchio's getFrameAcceleration)."""
    check_state(model, q=q, qd=qd, qdd=qdd)
    return _frame_motion(model, q, qd, qdd, name, reference, "a")


def frame_classical_acceleration(model: Model, q, qd, qdd, name, reference="local"):
    """Classical acceleration of the frame origin [linear; angular]: spatial + omega x v."""
    check_state(model, q=q, qd=qd, qdd=qdd)
    return _classical(*_frame_motion(model, q, qd, qdd, name, reference, "va"))


def jdot_qdot(model: Model, q, qd, name, reference="local"):
    """Spatial bias acceleration J-dot q-dot of a frame: its acceleration at qdd = 0."""
    return frame_acceleration(model, q, qd, jnp.zeros_like(qd), name, reference)


def point_velocity(model: Model, q, qd, name, point):
    """World-frame linear velocity of a point fixed to a frame (point in frame coordinates)."""
    R, p = frame_pose(model, q, name)
    vw = frame_velocity(model, q, qd, name, "local_world_aligned")
    return vw[:3] + jnp.cross(vw[3:], R @ point)


def point_acceleration(model: Model, q, qd, qdd, name, point):
    """World-frame classical linear acceleration of a point fixed to a frame."""
    R, p = frame_pose(model, q, name)
    r = R @ point
    vw = frame_velocity(model, q, qd, name, "local_world_aligned")
    aw = frame_acceleration(model, q, qd, qdd, name, "local_world_aligned")
    w, vo = vw[3:], vw[:3]
    vp = vo + jnp.cross(w, r)
    # classical acceleration of the point: spatial a + w x v_point, shifted to the point
    return aw[:3] + jnp.cross(aw[3:], r) + jnp.cross(w, vp)


@cpu_jit(static_argnames=('name', 'max_iters', 'tol', 'damping', 'max_step', 'position_only'))
def inverse_kinematics(model: Model, name, R_target, p_target, q0, *, max_iters=100, tol=1e-10,
                       damping=1e-6, max_step=0.5, position_only=False):
    """Iterative IK (Featherstone 2010 Fig. 6) with a damped pseudo-inverse.

    Drives frame ``name`` to the world pose (R_target, p_target).  Each iteration computes the
    pose error e = [p_err; log3(R_target R^T)] (world axes), solves
    ``dq = J^T (J J^T + damping 1)^-1 e`` with the local_world_aligned Jacobian, clips |dq| to
    ``max_step`` and integrates q on the manifold.

    Returns (q, converged, iterations, error_norm).
    """
    from .model.configuration import integrate
    from .spatial.rotations import log3

    fid = frame_index(model, name)
    rows = 3 if position_only else 6

    def err(q):
        R, p = frame_pose(model, q, fid)
        e = jnp.concatenate([p_target - p, log3(R_target @ R.T)])
        return e[:rows]

    def cond(s):
        q, i, en = s
        return (i < max_iters) & (en > tol)

    def body(s):
        q, i, _ = s
        e = err(q)
        J = frame_jacobian(model, q, fid, "local_world_aligned")[:rows]
        dq = J.T @ jnp.linalg.solve(J @ J.T + damping * jnp.eye(rows, dtype=J.dtype), e)
        n = jnp.linalg.norm(dq)
        dq = dq * jnp.minimum(1.0, max_step / jnp.maximum(n, 1e-30))
        qn = integrate(model, q, dq, 1.0)
        return qn, i + 1, jnp.linalg.norm(err(qn))

    e0 = jnp.linalg.norm(err(q0))
    q, it, en = lax.while_loop(cond, body, (q0, jnp.int32(0), e0))
    return q, en <= tol, it, en


for _n in ("frame_pose", "frame_jacobian", "frame_velocity", "frame_acceleration",
           "frame_classical_acceleration", "jdot_qdot", "point_velocity", "point_acceleration"):
    globals()[_n] = _by_index(globals()[_n])
del _n
