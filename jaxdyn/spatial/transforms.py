"""Plücker coordinate transforms stored as (E, r).

Conventions (Featherstone, *Rigid Body Dynamics Algorithms*, Table A.2; Featherstone 2010 Table 1):

* A motion vector is ``[omega; v]`` (angular first), a force vector ``[n; f]``.
* ``X = (E, r)`` is the transform from frame A to frame B, where ``E`` (3, 3) rotates
  A-coordinates into B-coordinates and ``r`` (3,) is the position of B's origin expressed
  in A-coordinates.  As a 6x6 motion transform ``X = [[E, 0], [-E rx, E]]``.
* The placement of B in A (Pinocchio's ``SE3``) is ``(R, p) = (E^T, r)``.

The ``apply_*`` functions, :func:`compose` and :func:`congruence` are component-first
(:mod:`jaxdyn.spatial.linalg`): one object or a batch-last stack (trailing batch axes).  The
other helpers act on one object; batch them with ``jax.vmap``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from .linalg import cross3, mm, mv, skew_right, tr


class Transform(NamedTuple):
    """Plücker transform A -> B: ``E`` (..., 3, 3), ``r`` (..., 3)."""

    E: jnp.ndarray
    r: jnp.ndarray


def skew(v):
    """3x3 cross-product matrix of v (3,): ``skew(v) @ x == cross(v, x)``."""
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack(
        [
            jnp.stack([z, -v[..., 2], v[..., 1]], -1),
            jnp.stack([v[..., 2], z, -v[..., 0]], -1),
            jnp.stack([-v[..., 1], v[..., 0], z], -1),
        ],
        -2,
    )


def rot_E(axis: int, theta):
    """Coordinate rotation E for a frame rotated by theta about x/y/z (Featherstone rotx etc)."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    o, z = jnp.ones_like(c), jnp.zeros_like(c)
    if axis == 0:
        rows = [[o, z, z], [z, c, s], [z, -s, c]]
    elif axis == 1:
        rows = [[c, z, -s], [z, o, z], [s, z, c]]
    else:
        rows = [[c, s, z], [-s, c, z], [z, z, o]]
    return jnp.stack([jnp.stack(rw, -1) for rw in rows], -2)


def rotx(theta) -> Transform:
    """Plücker transform of a pure rotation by theta (..., ) about x: X = [[E, 0], [0, E]],
    E = rot(x, theta)^T (coordinates of the rotated frame, Featherstone's rx)."""
    return Transform(rot_E(0, theta), jnp.zeros(jnp.shape(theta) + (3,), jnp.result_type(theta, float)))


def roty(theta) -> Transform:
    """As :func:`rotx`, about y."""
    return Transform(rot_E(1, theta), jnp.zeros(jnp.shape(theta) + (3,), jnp.result_type(theta, float)))


def rotz(theta) -> Transform:
    """As :func:`rotx`, about z."""
    return Transform(rot_E(2, theta), jnp.zeros(jnp.shape(theta) + (3,), jnp.result_type(theta, float)))


def xlt(r) -> Transform:
    """Plücker transform of a pure translation: the new frame's origin at r (..., 3) in the
    old frame's coordinates (Featherstone's xlt), E = identity."""
    r = jnp.asarray(r)
    return Transform(jnp.broadcast_to(jnp.eye(3, dtype=r.dtype), r.shape[:-1] + (3, 3)), r)


def identity(dtype=float) -> Transform:
    """The identity transform (E = I (3, 3), r = 0 (3,))."""
    return Transform(jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype))


def compose(X_bc: Transform, X_ab: Transform) -> Transform:
    """X_ac = X_bc X_ab (apply X_ab first): E_ac = E_bc E_ab, r_ac = r_ab + E_ab^T r_bc."""
    return Transform(mm(X_bc.E, X_ab.E), X_ab.r + mv(tr(X_ab.E), X_bc.r))


def inverse(X: Transform) -> Transform:
    """X^-1: B -> A (component-first)."""
    return Transform(tr(X.E), -mv(X.E, X.r))


def apply_motion(X: Transform, m):
    """X m for a motion vector m.  Component-first (:mod:`jaxdyn.spatial.linalg`): E (3, 3, ...),
    r (3, ...), m (6, ...) -- one transform or a batch-last stack."""
    w, v = m[:3], m[3:]
    return jnp.concatenate([mv(X.E, w), mv(X.E, v - cross3(X.r, w))])


def apply_motion_inv(X: Transform, m):
    """X^-1 m (B -> A) for a motion vector (component-first, as :func:`apply_motion`)."""
    Etw, Etv = mv(tr(X.E), m[:3]), mv(tr(X.E), m[3:])
    return jnp.concatenate([Etw, Etv + cross3(X.r, Etw)])


def apply_force(X: Transform, f):
    """X* f (A -> B) for a force vector f (component-first, as :func:`apply_motion`)."""
    n, fl = f[:3], f[3:]
    return jnp.concatenate([mv(X.E, n - cross3(X.r, fl)), mv(X.E, fl)])


def apply_force_T(X: Transform, f):
    """X^T f: force in B -> force in A (the backward-sweep transfer); component-first, as
    :func:`apply_motion`."""
    Etn, Etf = mv(tr(X.E), f[:3]), mv(tr(X.E), f[3:])
    return jnp.concatenate([Etn + cross3(X.r, Etf), Etf])


def congruence(X: Transform, I):
    """X^T I X for a symmetric 6x6 matrix I (6, 6, ...) (an inertia in B -> the same inertia
    in A), component-first, in the factors X = R T (R = diag(E, E), T = [[1, 0], [-rx, 1]]):
    :func:`translate_congruence` of :func:`rotate_congruence`, about half the multiplies of
    two 6x6 products."""
    return translate_congruence(X.r, rotate_congruence(X.E, I))


def rotate_congruence(E, I):
    """R^T I R with R = diag(E, E), for a symmetric I (6, 6, ...): each 3x3 block as
    E^T (.) E (component-first)."""
    Et = tr(E)
    A, B, C = (mm(Et, mm(I[i:i + 3, j:j + 3], E)) for i, j in ((0, 0), (0, 3), (3, 3)))
    return jnp.concatenate([jnp.concatenate([A, B], 1), jnp.concatenate([tr(B), C], 1)], 0)


def translate_congruence(r, I):
    """T^T I T with T = [[1, 0], [-rx, 1]], for a symmetric I = [[A, B], [B^T, C]]
    (6, 6, ...): [[A + rx B^T - B' rx, B'], [B'^T, C]] with B' = B + rx C (component-first)."""
    A, B, C = I[:3, :3], I[:3, 3:], I[3:, 3:]
    B1 = B + cross3(r[:, None], C)
    A1 = A + cross3(r[:, None], tr(B)) - skew_right(B1, r)
    return jnp.concatenate([jnp.concatenate([A1, B1], 1), jnp.concatenate([tr(B1), C], 1)], 0)


def to_matrix(X: Transform):
    """6x6 motion transform [[E, 0], [-E rx, E]] (component-first: (6, 6, ...))."""
    Z = jnp.zeros_like(X.E)
    return jnp.concatenate([jnp.concatenate([X.E, Z], 1), jnp.concatenate([-skew_right(X.E, X.r), X.E], 1)], 0)


def to_force_matrix(X: Transform):
    """6x6 force transform X* = X^-T = [[E, -E rx], [0, E]]."""
    Z = jnp.zeros_like(X.E)
    return jnp.block([[X.E, -X.E @ skew(X.r)], [Z, X.E]])


def from_matrix(X6) -> Transform:
    """Inverse of :func:`to_matrix`."""
    E = X6[:3, :3]
    rx = -E.T @ X6[3:, :3]
    return Transform(E, jnp.stack([rx[2, 1], rx[0, 2], rx[1, 0]]))


def XtoV(X: Transform):
    """Small-displacement motion vector of X (Featherstone Table 1): exact for small angles."""
    E, r = X.E, X.r
    w = 0.5 * jnp.stack([E[1, 2] - E[2, 1], E[2, 0] - E[0, 2], E[0, 1] - E[1, 0]])
    return jnp.concatenate([w, r])


def placement(X: Transform):
    """Pinocchio-style placement (R, p) of B in A."""
    return X.E.T, X.r


def from_placement(R, p) -> Transform:
    """Inverse of :func:`placement`: the transform from A to B coordinates of a frame B at
    Pinocchio-style placement (R (..., 3, 3), p (..., 3)) in A."""
    return Transform(jnp.swapaxes(R, -1, -2), p)
