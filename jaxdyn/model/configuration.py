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
from ..compiled import cpu_jit


def gather(x, idx):
    """x (n,) -> x[idx] with idx == n reading 0."""
    return jnp.concatenate([x, jnp.zeros((1,), x.dtype)])[idx]


def _scatter(base, idx, vals):
    """Write vals (nb, m) into base (n,) at idx (nb, m); slot n is dropped."""
    buf = jnp.concatenate([base, jnp.zeros((1,), base.dtype)])
    return buf.at[idx].set(vals)[:-1]


def _select(types, jtype, fn):
    """Evaluate fn(t) for each joint type present and pick the one of jtype.

    Only use with branches that are NaN-free on any input; for inputs that some branch cannot
    take (quaternions of another joint type), use :func:`_select_safe`.
    """
    outs = [(t, fn(t)) for t in types]
    out = outs[0][1]
    for t, o in outs[1:]:
        out = jnp.where(jtype == t, o, out)
    return out


def _select_safe(types, jtype, fn, *qs):
    """Like _select, but each branch t sees its own neutral q where jtype != t, so the
    unselected branches (normalizing a quaternion of zeros, say) cannot leak NaN gradients."""
    def branch(t):
        if len(types) == 1:
            return fn(t, *qs)
        neut = _neutral_joint(t, qs[0].shape[0], qs[0].dtype)
        safe = [jnp.where(jtype == t, x, neut) for x in qs]
        return fn(t, *safe)
    return _select(types, jtype, branch)


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


@cpu_jit
def integrate(model: Model, q: Configuration, v: Tangent, dt=1.0) -> Configuration:
    """q (+) v*dt on the configuration manifold.  q (nq,), v (nv,) -> (nq,)."""
    check_state(model, q=q, v=v)
    qj = gather(q, model.qidx)
    dv = gather(v * dt, model.vidx)
    fn = jax.vmap(lambda t, a, b: _select_safe(model.types, t, lambda tt, a: _integrate_joint(tt, a, b, model.nqj), a))
    return _scatter(q, model.qidx, fn(model.jtype, qj, dv))


@cpu_jit
def difference(model: Model, q0: Configuration, q1: Configuration) -> Tangent:
    """v such that integrate(q0, v, 1) == q1.  (nq,), (nq,) -> (nv,)."""
    check_state(model, q0=q0, q=q1)
    a, b = gather(q0, model.qidx), gather(q1, model.qidx)
    fn = jax.vmap(lambda t, x, y: _select_safe(model.types, t, lambda tt, x, y: _difference_joint(tt, x, y, model.k), x, y))
    out = fn(model.jtype, a, b)
    return _scatter(jnp.zeros(model.nv, q0.dtype), model.vidx, out)


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


@cpu_jit
def neutral(model: Model) -> Configuration:
    """The neutral configuration (zero angles, identity quaternions), (nq,)."""
    dtype = model.Xtree_r.dtype
    fn = jax.vmap(lambda t: _select(model.types, t, lambda tt: _neutral_joint(tt, model.nqj, dtype)))
    return _scatter(jnp.zeros(model.nq, dtype), model.qidx, fn(model.jtype))


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


@cpu_jit
def random_configuration(model: Model, key):
    """A random valid configuration: uniform within finite limits ([-pi, pi] / [-1, 1] where a
    joint has none), uniformly random unit quaternions.  (nq,)."""
    dtype = model.Xtree_r.dtype
    keys = jax.random.split(key, model.nb)
    lo = gather(model.q_lower, model.qidx)
    hi = gather(model.q_upper, model.qidx)
    fn = jax.vmap(lambda t, kk, l, h: _select(model.types, t,
                                             lambda tt: _random_joint(tt, kk, l, h, model.nqj, dtype)))
    return _scatter(jnp.zeros(model.nq, dtype), model.qidx, fn(model.jtype, keys, lo, hi))


@cpu_jit
def normalize(model: Model, q):
    """Project q onto the manifold (renormalize quaternions and (cos, sin) pairs)."""
    def one(t, qj):
        def f(tt, qj):
            if tt == J.SPHERICAL:
                return qj.at[:4].set(qj[:4] / jnp.linalg.norm(qj[:4]))
            if tt == J.FREE:
                return qj.at[3:7].set(qj[3:7] / jnp.linalg.norm(qj[3:7]))
            if tt in (J.REVOLUTE_UB,):
                return qj.at[:2].set(qj[:2] / jnp.linalg.norm(qj[:2]))
            if tt == J.PLANAR:
                return qj.at[2:4].set(qj[2:4] / jnp.linalg.norm(qj[2:4]))
            return qj
        return _select_safe(model.types, t, f, qj)
    return _scatter(q, model.qidx, jax.vmap(one)(model.jtype, gather(q, model.qidx)))
