"""Rigid-body spatial inertia stored compactly as (m, h = m c, Ibar).

``Ibar`` is the rotational inertia about the body-frame origin:
``Ibar = Ic + m (|c|^2 1 - c c^T)``.  As a 6x6 matrix (angular-first ordering)
``I = [[Ibar, hx], [hx^T, m 1]]`` (Featherstone eq. 2.63 with h = m c).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from .transforms import Transform, skew


class Inertia(NamedTuple):
    """Compact spatial inertia in a body frame: mass m (), first moment h = m c (3,) and the
    rotational inertia Ibar (3, 3) about the frame origin (Featherstone 2008, Sec. 2.13)."""
    m: jnp.ndarray     # ()
    h: jnp.ndarray     # (3,)  first moment m*c
    Ibar: jnp.ndarray  # (3, 3) about the frame origin


def mcI(m, c, Ic) -> Inertia:
    """Spatial inertia from mass m, COM c (3,) and rotational inertia Ic (3,3) about the COM.

    Only the symmetric part of Ic is used, so gradients with respect to Ic are symmetric.
    """
    c = jnp.asarray(c)
    Ic = 0.5 * (Ic + jnp.swapaxes(Ic, -1, -2))
    cx = skew(c)
    return Inertia(jnp.asarray(m), m * c, Ic - m * (cx @ cx))


def to_mcI(I: Inertia):
    """Inverse of :func:`mcI`: (m, c (3,), Ic (3, 3) about the COM).  A massless body gets
    c = 0 and Ic = Ibar."""
    c = com(I)
    cx = skew(c)
    return I.m, c, I.Ibar + I.m * (cx @ cx)


def to_matrix(I: Inertia):
    """The 6x6 spatial inertia matrix (angular-first): [[Ibar, h x], [(h x)^T, m 1]] (6, 6, ...).
    Component-first (:mod:`jaxdyn.spatial.linalg`): m (...), h (3, ...), Ibar (3, 3, ...)."""
    m, h = I.m, I.h
    z = jnp.zeros_like(h[0])
    hx = jnp.stack([jnp.stack([z, -h[2], h[1]]), jnp.stack([h[2], z, -h[0]]), jnp.stack([-h[1], h[0], z])])
    mI = jnp.expand_dims(m, (0, 1)) * jnp.eye(3, dtype=h.dtype).reshape((3, 3) + (1,) * jnp.ndim(m))
    return jnp.concatenate([jnp.concatenate([I.Ibar, hx], 1), jnp.concatenate([-hx, mI], 1)], 0)


def apply(I: Inertia, v):
    """I v for a motion vector v (6,) -> force (6,)."""
    w, vo = v[:3], v[3:]
    return jnp.concatenate([I.Ibar @ w + jnp.cross(I.h, vo), I.m * vo - jnp.cross(I.h, w)])


def transform_to_parent(X: Transform, I: Inertia) -> Inertia:
    """X^T I X: inertia given in frame B expressed in frame A, for X = (E, r): A -> B."""
    hA = X.E.T @ I.h
    h = hA + I.m * X.r
    rx, hAx = skew(X.r), skew(hA)
    Ibar = X.E.T @ I.Ibar @ X.E - rx @ hAx - skew(h) @ rx
    return Inertia(I.m, h, Ibar)


def add(a: Inertia, b: Inertia) -> Inertia:
    """Sum of two inertias expressed in the same frame."""
    return Inertia(a.m + b.m, a.h + b.h, a.Ibar + b.Ibar)


def com(I: Inertia):
    """Center of mass; NaN-free for m = 0 (returns 0)."""
    safe = jnp.where(I.m > 0, I.m, 1.0)
    return jnp.where(I.m > 0, I.h / safe, 0.0)


def to_vector(I: Inertia):
    """10 parameters (Pinocchio order): m, h_x, h_y, h_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz (about origin)."""
    J = I.Ibar
    return jnp.stack([I.m, I.h[0], I.h[1], I.h[2], J[0, 0], J[0, 1], J[1, 1], J[0, 2], J[1, 2], J[2, 2]])


def from_vector(p) -> Inertia:
    """Inverse of :func:`to_vector`."""
    Ibar = jnp.stack([
        jnp.stack([p[4], p[5], p[7]]),
        jnp.stack([p[5], p[6], p[8]]),
        jnp.stack([p[7], p[8], p[9]]),
    ])
    return Inertia(p[0], p[1:4], Ibar)


def pseudo_inertia(I: Inertia):
    """4x4 pseudo-inertia J = [[Sigma, h], [h^T, m]] with Sigma = tr(Ibar)/2 1 - Ibar.

    Physical consistency <=> J is positive (semi)definite (Wensing, Kim and Slotine 2018).
    """
    Sigma = 0.5 * jnp.trace(I.Ibar) * jnp.eye(3, dtype=I.h.dtype) - I.Ibar
    top = jnp.concatenate([Sigma, I.h[:, None]], 1)
    bot = jnp.concatenate([I.h, I.m[None]])[None, :]
    return jnp.concatenate([top, bot], 0)


def from_pseudo_inertia(J) -> Inertia:
    """Inverse of :func:`pseudo_inertia`: J (4, 4) = [[Sigma, h], [h^T, m]] with
    Sigma = tr(Ibar)/2 1 - Ibar -> Inertia (m, h, Ibar = tr(Sigma) 1 - Sigma)."""
    Sigma, h, m = J[:3, :3], J[:3, 3], J[3, 3]
    return Inertia(m, h, jnp.trace(Sigma) * jnp.eye(3, dtype=J.dtype) - Sigma)


def from_log_cholesky(theta) -> Inertia:
    """Log-Cholesky parametrization theta (10,) -> physically consistent inertia.

    J = U U^T with U upper triangular, positive diagonal exp(alpha, d1, d2, d3) (Rucker &
    Wensing 2022).  Any real theta gives a valid body: use it for unconstrained identification.
    """
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = [theta[i] for i in range(10)]
    e = jnp.exp(alpha)
    z = jnp.zeros_like(alpha)
    U = e * jnp.stack([
        jnp.stack([jnp.exp(d1), s12, s13, t1]),
        jnp.stack([z, jnp.exp(d2), s23, t2]),
        jnp.stack([z, z, jnp.exp(d3), t3]),
        jnp.stack([z, z, z, jnp.ones_like(alpha)]),
    ])
    return from_pseudo_inertia(U @ U.T)


def to_log_cholesky(I: Inertia):
    """Inverse of :func:`from_log_cholesky`: theta (10,) with from_log_cholesky(theta) == I.

    Needs a positive-definite pseudo-inertia (positive mass, a body with volume); J = U U^T is
    factored as U = P chol(P J P) P with P the exchange matrix (an upper-triangular Cholesky).
    NaN for a body that is not physically consistent.
    """
    J = pseudo_inertia(I)
    P = jnp.eye(4, dtype=J.dtype)[::-1]
    L = jnp.linalg.cholesky(P @ J @ P)
    U = P @ L @ P
    e = U[3, 3]
    alpha = jnp.log(e)
    V = U / e
    return jnp.stack([alpha, jnp.log(V[0, 0]), jnp.log(V[1, 1]), jnp.log(V[2, 2]), V[0, 1], V[1, 2],
                      V[0, 2], V[0, 3], V[1, 3], V[2, 3]])
