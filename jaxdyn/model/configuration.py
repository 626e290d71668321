"""Configuration-space operations on the joint manifolds (quaternions stay unit).

``integrate(model, q, v, dt)`` is q (+) v dt with the exponential map of each joint, the same
convention as ``pinocchio.integrate`` (body-frame velocities); ``difference`` is its inverse.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp

from .._typing import Configuration, Tangent
from ..spatial import rotations as Rot
from . import joints as J
from .model import Model, check_state


def _per_joint(model: Model, fn, xs, sizes, out_size, dtype):
    """For each run of joints of one type t: ``fn(t, *joint_slices)`` vmapped over the run's
    joints, where ``xs`` are flat vectors split by ``sizes`` (each "q" or "v" per joint); the
    results, one (out_size(t),) vector per joint, concatenated in joint order."""
    parts = []
    for run in model.runs:
        args = []
        for x, kind in zip(xs, sizes):
            a, w = (run.q0, run.nq) if kind == "q" else (run.v0, run.nv)
            args.append(x[a:a + run.n * w].reshape(run.n, w))
        parts.append(jax.vmap(lambda *a, t=run.jtype: fn(t, *a))(*args).reshape(-1))
    n = sum(out_size(r.jtype) * r.n for r in model.runs)
    return jnp.concatenate(parts) if parts else jnp.zeros((n,), dtype)


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
    return _per_joint(model, lambda t, qj, dv: _integrate_joint(t, qj, dv, J.NQ[t]), (q, v * dt), "qv",
                      lambda t: J.NQ[t], q.dtype)


@jax.jit
def difference(model: Model, q0: Configuration, q1: Configuration) -> Tangent:
    """v such that integrate(q0, v, 1) == q1.  (nq,), (nq,) -> (nv,)."""
    check_state(model, q0=q0, q=q1)
    return _per_joint(model, lambda t, a, b: _difference_joint(t, a, b, J.NV[t]), (q0, q1), "qq",
                      lambda t: J.NV[t], q0.dtype)


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
    return jnp.concatenate([jnp.tile(_neutral_joint(r.jtype, r.nq, dt), r.n) for r in model.runs]
                           + [jnp.zeros(0, dt)])


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
    parts = []
    for run in model.runs:
        lo = model.q_lower[run.q0:run.q0 + run.n * run.nq].reshape(run.n, run.nq)
        hi = model.q_upper[run.q0:run.q0 + run.n * run.nq].reshape(run.n, run.nq)
        fn = lambda k, l, h, t=run.jtype: _random_joint(t, k, l, h, J.NQ[t], dt)
        parts.append(jax.vmap(fn)(keys[run.start:run.stop], lo, hi).reshape(-1))
    return jnp.concatenate(parts + [jnp.zeros(0, dt)])


@jax.jit
def normalize(model: Model, q):
    """Project q onto the manifold (renormalize quaternions and (cos, sin) pairs)."""
    def f(t, qj):
        if t == J.SPHERICAL:
            return qj.at[:4].set(qj[:4] / jnp.linalg.norm(qj[:4]))
        if t == J.FREE:
            return qj.at[3:7].set(qj[3:7] / jnp.linalg.norm(qj[3:7]))
        if t == J.REVOLUTE_UB:
            return qj.at[:2].set(qj[:2] / jnp.linalg.norm(qj[:2]))
        if t == J.PLANAR:
            return qj.at[2:4].set(qj[2:4] / jnp.linalg.norm(qj[2:4]))
        return qj
    return _per_joint(model, f, (q,), "q", lambda t: J.NQ[t], q.dtype)
