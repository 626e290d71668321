"""Rotations: unit quaternions (x, y, z, w: Pinocchio's order), SO(3)/SE(3) exp and log.

All functions are NaN-free (values and gradients) at zero angle: small angles use Taylor
series selected with ``jnp.where`` on a safe argument.
"""
from __future__ import annotations

import jax.numpy as jnp

from .transforms import skew

_SMALL = 1e-6


def quat_to_rot(q):
    """Rotation matrix (3, 3) of a unit quaternion q = (x, y, z, w)."""
    x, y, z, w = q[0], q[1], q[2], q[3]
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)]),
        jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)]),
        jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]),
    ])


def rot_to_quat(R):
    """Unit quaternion (x, y, z, w) with w >= 0 of a rotation matrix (Shepperd's method)."""
    tr = jnp.trace(R)
    cands = jnp.stack([
        jnp.stack([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], 1 + tr]),
        jnp.stack([1 + 2 * R[0, 0] - tr, R[0, 1] + R[1, 0], R[0, 2] + R[2, 0], R[2, 1] - R[1, 2]]),
        jnp.stack([R[0, 1] + R[1, 0], 1 + 2 * R[1, 1] - tr, R[1, 2] + R[2, 1], R[0, 2] - R[2, 0]]),
        jnp.stack([R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1 + 2 * R[2, 2] - tr, R[1, 0] - R[0, 1]]),
    ])
    k = jnp.argmax(jnp.stack([tr, R[0, 0], R[1, 1], R[2, 2]]))
    q = cands[k]
    q = q / jnp.linalg.norm(q)
    return jnp.where(q[3] < 0, -q, q)


def quat_mul(a, b):
    """Hamilton product a*b of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a[0], a[1], a[2], a[3]
    bx, by, bz, bw = b[0], b[1], b[2], b[3]
    return jnp.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])


def _theta_coeffs(w):
    """theta^2 and a safe theta for Taylor switching."""
    t2 = jnp.dot(w, w)
    small = t2 < _SMALL**2
    t2s = jnp.where(small, 1.0, t2)
    return t2, small, jnp.sqrt(t2s)


def quat_exp(w):
    """Quaternion (x, y, z, w) of the rotation vector w (3,)."""
    t2, small, t = _theta_coeffs(w)
    s = jnp.where(small, 0.5 - t2 / 48.0, jnp.sin(0.5 * t) / t)
    c = jnp.where(small, 1 - t2 / 8.0, jnp.cos(0.5 * t))
    return jnp.concatenate([s * w, c[None]])


def quat_log(q):
    """Rotation vector of a unit quaternion (shortest arc)."""
    q = jnp.where(q[3] < 0, -q, q)
    v, w = q[:3], q[3]
    n2 = jnp.dot(v, v)
    small = n2 < _SMALL**2
    n = jnp.sqrt(jnp.where(small, 1.0, n2))
    ang = 2 * jnp.arctan2(n, w)
    k = jnp.where(small, 2.0 / w - (2.0 / 3.0) * n2 / w**3, ang / n)
    return k * v


def exp3(w):
    """SO(3) exponential (Rodrigues): R = exp([w]x)."""
    t2, small, t = _theta_coeffs(w)
    A = jnp.where(small, 1 - t2 / 6.0, jnp.sin(t) / t)
    B = jnp.where(small, 0.5 - t2 / 24.0, (1 - jnp.cos(t)) / t2_safe(t2, small))
    W = skew(w)
    return jnp.eye(3, dtype=w.dtype) + A * W + B * (W @ W)


def t2_safe(t2, small):
    """t2 where ``small`` is False, else 1: a safe denominator for series branches, so both
    sides of a ``jnp.where`` stay finite under autodiff."""
    return jnp.where(small, 1.0, t2)


def log3(R):
    """SO(3) logarithm: rotation vector w with exp3(w) = R (angle in [0, pi])."""
    return quat_log(rot_to_quat(R))


def _V_coeffs(w):
    t2, small, t = _theta_coeffs(w)
    B = jnp.where(small, 0.5 - t2 / 24.0, (1 - jnp.cos(t)) / t2_safe(t2, small))
    C = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - jnp.sin(t)) / (t2_safe(t2, small) * t))
    return B, C


def exp6(v, w):
    """SE(3) exponential of the body twist (v linear, w angular): returns (R, p)."""
    B, C = _V_coeffs(w)
    W = skew(w)
    V = jnp.eye(3, dtype=w.dtype) + B * W + C * (W @ W)
    return exp3(w), V @ v


def log6(R, p):
    """SE(3) logarithm: twist (v, w) with exp6(v, w) = (R, p)."""
    w = log3(R)
    t2, small, t = _theta_coeffs(w)
    W = skew(w)
    # V^-1 = 1 - W/2 + (1/t^2)(1 - (t sin t)/(2(1 - cos t))) W^2
    D = jnp.where(small, 1.0 / 12.0 + t2 / 720.0,
                  (1 - t * jnp.sin(t) / (2 * (1 - jnp.cos(t)))) / t2_safe(t2, small))
    Vinv = jnp.eye(3, dtype=w.dtype) - 0.5 * W + D * (W @ W)
    return Vinv @ p, w
