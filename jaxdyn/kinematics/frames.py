"""Frames: poses, Jacobians, velocities, accelerations (spatial and classical), J-dot q-dot and
point motion of named frames, one frame at a time or several from one pass (:func:`frame_terms`).

Public frame velocities, accelerations and Jacobians use Pinocchio's convention: rows
``[linear; angular]`` and ``reference`` = "world" (world axes, world origin), "local" (frame
axes and origin) or "local_world_aligned" (frame origin, world axes).  The public one-frame
functions resolve a frame name to an index before their jit (one compiled program serves every
frame of a model)."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Configuration, Tangent
from .. import spatial as sp
from ..model.model import Model, check_state
from .bodies import body_velocities, dof_columns, joint_transforms, world_transforms

REFERENCES = ("world", "local", "local_world_aligned")


def frame_index(model, name_or_id):
    """Frame index: names are resolved in Python, integers (possibly traced) pass through."""
    return model.frame_id(name_or_id) if isinstance(name_or_id, str) else name_or_id


def _by_index(fn):
    """Public wrapper: resolve a frame name to an index *before* jit, so one compiled
    program serves every frame of a model (names stay out of the jit cache key)."""
    import functools

    import inspect
    statics = ("reference",) if "reference" in inspect.signature(fn).parameters else ()
    jitted = jax.jit(fn, static_argnames=statics)

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
    b = jnp.asarray(np.where(model.frame_body < 0, model.nb, model.frame_body), jnp.int32)[fid]
    Xb = sp.Transform(X0.E[b], X0.r[b])
    return sp.compose(sp.Transform(model.frame_E[fid], model.frame_r[fid]), Xb), b


def frame_pose(model: Model, q: Configuration, name):
    """World pose of a named frame: (R (3, 3) frame->world rotation, p (3,) origin)."""
    check_state(model, q=q)
    fid = frame_index(model, name)
    Xup, _ = joint_transforms(model, q)
    Xf, _ = frame_X0(model, world_transforms(model, Xup), fid)
    return Xf.E.T, Xf.r


@jax.jit
def frame_poses(model: Model, q):
    """World poses of all frames: R (nf, 3, 3), p (nf, 3) (empty for a model without frames)."""
    check_state(model, q=q)
    if not model.frame_names:
        return jnp.zeros((0, 3, 3), model.frame_E.dtype), jnp.zeros((0, 3), model.frame_r.dtype)
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    Xf, _ = jax.vmap(lambda i: frame_X0(model, X0, i))(jnp.arange(len(model.frame_names)))
    return jnp.swapaxes(Xf.E, -1, -2), Xf.r


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
    return _jacobian(model, dof_columns(model, X0, S), b, Xf, reference)


def _dof_ancestry(model: Model):
    """(nb + 1, nv): row b marks the dofs at or above body b (row nb, the world: none)."""
    t = model.topology
    return np.concatenate([t.ancestors[:, t.dof_body], np.zeros((1, model.nv))])


def _jacobian(model, J0, b, Xf, reference):
    """Frame Jacobian (6, nv) [linear; angular] in ``reference`` from every dof's world-frame
    motion column J0 (nv, 6), the frame's body b and world -> frame Xf: the columns of the
    dofs at or above the frame's body."""
    J0 = (J0 * jnp.asarray(_dof_ancestry(model), J0.dtype)[b][:, None]).T
    return to_pin_order(change_reference(J0, Xf, reference))


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
    J0 = dof_columns(model, X0, S)

    def one(fid):
        Xf, b = frame_X0(model, X0, fid)
        J = _jacobian(model, J0, b, Xf, reference)
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


for _n in ("frame_pose", "frame_jacobian", "frame_velocity", "frame_acceleration",
           "frame_classical_acceleration", "jdot_qdot", "point_velocity", "point_acceleration"):
    globals()[_n] = _by_index(globals()[_n])
del _n
