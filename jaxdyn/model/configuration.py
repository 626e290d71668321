"""Configuration-space operations on the joint manifolds (quaternions stay unit).

``integrate(model, q, v, dt)`` is q (+) v dt with the exponential map of each joint, the same
convention as ``pinocchio.integrate`` (body-frame velocities); ``difference`` is its inverse.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Configuration, Tangent
from ..spatial import rotations as Rot
from . import joints as J
from .model import Model, check_state


def _per_joint(model: Model, fn, xs, kinds, out_kind, dtype):
    """``fn(t, *joint_slices)`` vmapped over the joints of each type t, where ``xs`` are flat
    vectors and ``kinds`` says which are configurations ("q") and which velocities ("v"); the
    results, one vector per joint, laid out as a configuration or velocity (``out_kind``)."""
    t = model.topology
    out = jnp.zeros(model.nq if out_kind == "q" else model.nv, dtype)
    for g in t.joint_groups:
        idx = {"q": np.asarray(g.qidx, int).reshape(len(g.bodies), -1),
               "v": np.asarray([np.arange(t.vaddr[b], t.vaddr[b + 1]) for b in g.bodies], int).reshape(len(g.bodies), -1)}
        args = [x[idx[k]] for x, k in zip(xs, kinds)]
        if idx[out_kind].size:
            out = out.at[idx[out_kind]].set(jax.vmap(lambda *a, tt=g.jtype: fn(tt, *a))(*args))
    return out


def _se2(th, v):
    """Translation of the SE(2) exponential of local twist (vx, vy, w=th)."""
    small = jnp.abs(th) < 1e-6
    ts = jnp.where(small, 1.0, th)
    a = jnp.where(small, 1 - th**2 / 6, jnp.sin(ts) / ts)
    b = jnp.where(small, th / 2 - th**3 / 24, (1 - jnp.cos(ts)) / ts)
    return jnp.stack([a * v[0] - b * v[1], b * v[0] + a * v[1]])


def _integrate_joint(t, qj, dv, nqj):
    if t in (J.FIXED,):
        return qj
    if t in (J.REVOLUTE, J.PRISMATIC, J.HELICAL):
        return qj.at[0].add(dv[0])
    if t == J.REVOLUTE_UB:
        c, s = jnp.cos(dv[0]), jnp.sin(dv[0])
        return qj.at[0].set(qj[0] * c - qj[1] * s).at[1].set(qj[1] * c + qj[0] * s)
    if t == J.SPHERICAL:
        qn = Rot.quat_mul(qj[:4], Rot.quat_exp(dv[:3]))
        return qj.at[:4].set(qn / jnp.linalg.norm(qn))
    if t == J.FREE:
        R = Rot.quat_to_rot(qj[3:7])
        _, dp = Rot.exp6(dv[:3], dv[3:6])
        qn = Rot.quat_mul(qj[3:7], Rot.quat_exp(dv[3:6]))
        return qj.at[:3].set(qj[:3] + R @ dp).at[3:7].set(qn / jnp.linalg.norm(qn))
    if t == J.PLANAR:
        c0, s0 = qj[2], qj[3]
        d = _se2(dv[2], dv[:2])
        c, s = jnp.cos(dv[2]), jnp.sin(dv[2])
        return jnp.stack([qj[0] + c0 * d[0] - s0 * d[1], qj[1] + s0 * d[0] + c0 * d[1],
                          c0 * c - s0 * s, s0 * c + c0 * s] + [qj[i] for i in range(4, nqj)])
    raise ValueError(t)


def _difference_joint(t, q0, q1, k):
    z = jnp.zeros((k,), q0.dtype)
    if t == J.FIXED:
        return z
    if t in (J.REVOLUTE, J.PRISMATIC, J.HELICAL):
        return z.at[0].set(q1[0] - q0[0])
    if t == J.REVOLUTE_UB:
        return z.at[0].set(jnp.arctan2(q0[0] * q1[1] - q0[1] * q1[0], q0[0] * q1[0] + q0[1] * q1[1]))
    if t == J.SPHERICAL:
        inv = q0[:4] * jnp.array([-1, -1, -1, 1], q0.dtype)
        return z.at[:3].set(Rot.quat_log(Rot.quat_mul(inv, q1[:4])))
    if t == J.FREE:
        R0, R1 = Rot.quat_to_rot(q0[3:7]), Rot.quat_to_rot(q1[3:7])
        v, w = Rot.log6(R0.T @ R1, R0.T @ (q1[:3] - q0[:3]))
        return z.at[:3].set(v).at[3:6].set(w)
    if t == J.PLANAR:
        c0, s0 = q0[2], q0[3]
        dth = jnp.arctan2(c0 * q1[3] - s0 * q1[2], c0 * q1[2] + s0 * q1[3])
        dp = q1[:2] - q0[:2]
        loc = jnp.stack([c0 * dp[0] + s0 * dp[1], -s0 * dp[0] + c0 * dp[1]])
        small = jnp.abs(dth) < 1e-6
        ts = jnp.where(small, 1.0, dth)
        a = jnp.where(small, 1 - dth**2 / 6, jnp.sin(ts) / ts)
        b = jnp.where(small, dth / 2 - dth**3 / 24, (1 - jnp.cos(ts)) / ts)
        det = a * a + b * b
        v = jnp.stack([(a * loc[0] + b * loc[1]) / det, (-b * loc[0] + a * loc[1]) / det])
        return z.at[:2].set(v).at[2].set(dth)
    raise ValueError(t)


@jax.jit
def integrate(model: Model, q: Configuration, v: Tangent, dt=1.0) -> Configuration:
    """q (+) v*dt on the configuration manifold.  q (nq,), v (nv,) -> (nq,)."""
    check_state(model, q=q, v=v)
    return _per_joint(model, lambda t, qj, dv: _integrate_joint(t, qj, dv, J.NQ[t]), (q, v * dt), "qv", "q",
                      jnp.result_type(q, v))


@jax.jit
def difference(model: Model, q0: Configuration, q1: Configuration) -> Tangent:
    """v such that integrate(q0, v, 1) == q1.  (nq,), (nq,) -> (nv,)."""
    check_state(model, q0=q0, q=q1)
    return _per_joint(model, lambda t, a, b: _difference_joint(t, a, b, J.NV[t]), (q0, q1), "qq", "v",
                      jnp.result_type(q0, q1))


def _neutral_joint(t, nqj, dtype):
    z = jnp.zeros((nqj,), dtype)
    if t == J.REVOLUTE_UB:
        return z.at[0].set(1.0)
    if t == J.SPHERICAL:
        return z.at[3].set(1.0)
    if t == J.FREE:
        return z.at[6].set(1.0)
    if t == J.PLANAR:
        return z.at[2].set(1.0)
    return z


@jax.jit
def neutral(model: Model) -> Configuration:
    """The neutral configuration (zero angles, identity quaternions), (nq,)."""
    dt = model.Xtree_r.dtype
    return _per_joint(model, lambda t, q: _neutral_joint(t, J.NQ[t], dt), (jnp.zeros(model.nq, dt),), "q", "q", dt)


def _random_joint(t, key, lo, hi, nqj, dtype):
    k1, k2 = jax.random.split(key)
    z = jnp.zeros((nqj,), dtype)
    if t in (J.REVOLUTE, J.HELICAL, J.PRISMATIC):
        span = jnp.pi if t != J.PRISMATIC else 1.0
        l = jnp.where(jnp.isfinite(lo[0]), lo[0], -span)
        h = jnp.where(jnp.isfinite(hi[0]), hi[0], span)
        return z.at[0].set(jax.random.uniform(k1, (), dtype, 0.0, 1.0) * (h - l) + l)
    if t == J.REVOLUTE_UB:
        a = jax.random.uniform(k1, (), dtype, -jnp.pi, jnp.pi)
        return z.at[0].set(jnp.cos(a)).at[1].set(jnp.sin(a))
    if t == J.SPHERICAL:
        qq = jax.random.normal(k1, (4,), dtype)
        return z.at[:4].set(qq / jnp.linalg.norm(qq))
    if t == J.FREE:
        qq = jax.random.normal(k1, (4,), dtype)
        p = jax.random.uniform(k2, (3,), dtype, -1.0, 1.0)
        return z.at[:3].set(p).at[3:7].set(qq / jnp.linalg.norm(qq))
    if t == J.PLANAR:
        p = jax.random.uniform(k2, (3,), dtype, -1.0, 1.0)
        a = p[2] * jnp.pi
        return z.at[:4].set(jnp.stack([p[0], p[1], jnp.cos(a), jnp.sin(a)]))
    return z


@jax.jit
def random_configuration(model: Model, key):
    """A random valid configuration: uniform within finite limits ([-pi, pi] / [-1, 1] where a
    joint has none), uniformly random unit quaternions.  (nq,)."""
    dt = model.Xtree_r.dtype
    keys = jax.random.split(key, max(model.nb, 1))
    out = jnp.zeros(model.nq, dt)
    for g in model.topology.joint_groups:
        idx = np.asarray(g.qidx, int).reshape(len(g.bodies), -1)
        fn = lambda k, l, h, t=g.jtype: _random_joint(t, k, l, h, J.NQ[t], dt)
        if idx.size:
            out = out.at[idx].set(jax.vmap(fn)(keys[np.asarray(g.bodies)], model.q_lower[idx], model.q_upper[idx]))
    return out


_UNIT_PARTS = {J.SPHERICAL: slice(0, 4), J.FREE: slice(3, 7), J.REVOLUTE_UB: slice(0, 2), J.PLANAR: slice(2, 4)}
"""The coordinates of each joint type that must have unit norm (quaternion, (cos, sin))."""


@jax.jit
def normalize(model: Model, q):
    """Project q onto the manifold (renormalize quaternions and (cos, sin) pairs)."""
    def f(t, qj):
        part = _UNIT_PARTS.get(t)
        return qj if part is None else qj.at[part].set(qj[part] / jnp.linalg.norm(qj[part]))
    return _per_joint(model, f, (q,), "q", "q", q.dtype)


def normalized_or_raise(model: Model, q, what: str = "q", tol: float = 1e-6):
    """``q`` (nq,) with its quaternions and (cos, sin) pairs renormalized, outside jit (numpy).

    Raises :class:`~jaxdyn.errors.ArgumentError` naming ``what`` and the joint when an entry is
    not finite or a unit part has norm below ``tol`` (a zero quaternion has no rotation to
    renormalize to).  Returns ``(q_unit, changed)``: ``changed`` is True when some norm differed
    from 1 by more than 1e-9.
    """
    from ..errors import ArgumentError
    q = np.array(q, dtype=float)
    if q.shape != (model.nq,):
        raise ArgumentError(f"{what} must have shape ({model.nq},) for {model.name!r}, got {q.shape}")
    changed = False
    for i, t in enumerate(model.topology.jtype):
        name, sl = model.joint_names[i], model.joint_q(i)
        qj = q[sl]
        if not np.all(np.isfinite(qj)):
            raise ArgumentError(f"{what}: joint {name!r} has non-finite coordinates {qj.tolist()}")
        part = _UNIT_PARTS.get(t)
        if part is None:
            continue
        n = float(np.linalg.norm(qj[part]))
        if n < tol:
            kind = "(cos, sin) pair" if part.stop - part.start == 2 else "quaternion"
            raise ArgumentError(f"{what}: joint {name!r} has a {kind} of norm {n:.3g} "
                                f"(entries {qj[part].tolist()}); it must be a unit {kind}")
        changed |= abs(n - 1.0) > 1e-9
        q[sl][part] = qj[part] / n
    return q, changed
