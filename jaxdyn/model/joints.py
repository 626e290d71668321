"""Joint models: ``jcalc`` returns the joint transforms XJ and motion subspaces S of a run of
joints of one (static) type.

Joint types (integer codes stored in ``Model.jtype``) and their coordinates, chosen to match
Pinocchio so that states move between the two libraries as-is:

=============  ====  ====  ==========================================================
type           nq    nv    q / v
=============  ====  ====  ==========================================================
FIXED          0     0     -
REVOLUTE       1     1     angle about unit ``axis``
REVOLUTE_UB    2     1     (cos, sin) of the angle (URDF ``continuous``; Pinocchio RUB)
PRISMATIC      1     1     displacement along ``axis``
HELICAL        1     1     angle; translation ``pitch * angle`` along ``axis``
SPHERICAL      4     3     unit quaternion (x, y, z, w); v = angular velocity, child frame
FREE           7     6     position + quaternion; v = [linear; angular] in the child frame
PLANAR         4     3     (x, y, cos, sin) in the parent xy-plane; v = (vx, vy, wz), child frame
=============  ====  ====  ==========================================================

Quaternions and (cos, sin) pairs are normalized before use, so a q off the unit sphere
(e.g. a finite-difference step along a direction of R^nq) is the configuration of its
projection, and d/dq along the radial direction is zero.

All S are constant in the child frame, so the joint bias c_J is zero and the velocity-product
term is v x (S qd) (Featherstone eq. 4.x).  S is returned angular-first (Featherstone order).
"""
from __future__ import annotations

from enum import IntEnum

import jax.numpy as jnp
import numpy as np

class JointType(IntEnum):
    """Joint type codes (the integers stored in ``Model.jtype``) with their sizes."""
    FIXED = 0
    REVOLUTE = 1
    REVOLUTE_UB = 2
    PRISMATIC = 3
    HELICAL = 4
    SPHERICAL = 5
    FREE = 6
    PLANAR = 7

    @property
    def nq(self) -> int:
        """Number of configuration coordinates."""
        return _SIZES[self][0]

    @property
    def nv(self) -> int:
        """Number of velocity coordinates (tangent dimension)."""
        return _SIZES[self][1]

    @property
    def label(self) -> str:
        """The name used in configs and ``build_model`` ("revolute", "free", ...)."""
        return _SIZES[self][2]


_SIZES = {0: (0, 0, "fixed"), 1: (1, 1, "revolute"), 2: (2, 1, "revolute_unbounded"), 3: (1, 1, "prismatic"),
          4: (1, 1, "helical"), 5: (4, 3, "spherical"), 6: (7, 6, "free"), 7: (4, 3, "planar")}
FIXED, REVOLUTE, REVOLUTE_UB, PRISMATIC, HELICAL, SPHERICAL, FREE, PLANAR = JointType
JOINT_NAMES = {t: t.label for t in JointType}
JOINT_CODES = {t.label: t for t in JointType}
NQ = {t: t.nq for t in JointType}
NV = {t: t.nv for t in JointType}


def joint_code(t) -> int:
    """Integer code of a joint type given by name or code; raises on unknown types."""
    from ..errors import ModelError

    if isinstance(t, str):
        if t not in JOINT_CODES:
            raise ModelError(f"unknown joint type {t!r}; known: {sorted(JOINT_CODES)}")
        return int(JOINT_CODES[t])
    if int(t) not in JOINT_NAMES:
        raise ModelError(f"unknown joint type code {t!r}; known: {dict((int(k), v) for k, v in JOINT_NAMES.items())}")
    return int(t)


def _unit(x):
    """x / |x| along axis 1 (the coordinates of a joint; x = 0 stays 0).  The rotation
    coordinates of a joint (a quaternion, a (cos, sin) pair) give an orthogonal rotation only
    at unit norm; normalized here, every algorithm sees the same rotation for any q, also off
    the unit sphere (where a finite difference along a direction of R^nq goes), and d/dq along
    the radial direction is zero."""
    n2 = sum(x[:, i] * x[:, i] for i in range(x.shape[1]))[:, None]
    return x / jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))


def _axis_E(a, c, s):
    """E = R^T (n, 3, 3, ...) for rotations by the angle (cos c, sin s) (n, ...) about unit axes
    a (n, 3, ...): R = 1 + s [a]x + (1 - c)(a a^T - |a|^2 1) (Rodrigues), written entrywise so
    that it serves one state and a batch-last chunk alike."""
    n2 = a[:, 0] * a[:, 0] + a[:, 1] * a[:, 1] + a[:, 2] * a[:, 2]
    K = [[None, -a[:, 2], a[:, 1]], [a[:, 2], None, -a[:, 0]], [-a[:, 1], a[:, 0], None]]
    one_c = 1 - c

    def E(i, j):                    # R[j, i]; [a]x is antisymmetric
        e = one_c * a[:, i] * a[:, j]
        if i == j:
            return 1 - one_c * n2 + e
        return e - s * K[i][j]
    return jnp.stack([jnp.stack([E(i, j) for j in range(3)], 1) for i in range(3)], 1)


def _quat_E(qu):
    """E = R^T (n, 3, 3, ...) of unit quaternions qu (n, 4, ...) = (x, y, z, w)."""
    x, y, z, w = qu[:, 0], qu[:, 1], qu[:, 2], qu[:, 3]
    R = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return jnp.stack([jnp.stack([R[j][i] for j in range(3)], 1) for i in range(3)], 1)


def _constant_S(cols, n, like):
    """S (n, 6, k, 1, ...) from its nonzero entries ``cols`` {(row, col): 1}, broadcastable
    against the trailing axes of ``like`` (n, m, ...)."""
    k = 1 + max((c for _, c in cols), default=-1)
    S = np.zeros((1, 6, k))
    for rc in cols:
        S[(0,) + rc] = 1.0
    return jnp.asarray(S.reshape(S.shape + (1,) * (like.ndim - 2)), like.dtype)


def jcalc(t, axis, pitch, qj, keep=lambda x: x):
    """Joint transforms and motion subspaces of n joints of one type ``t`` (static).

    Args:
      axis (n, 3, ...), pitch (n, ...): joint parameters; qj (n, NQ[t], ...) their coordinates
        (``...``: trailing batch axes, none for one state, the same count for every argument).
      keep: the batching module's fusion barrier (:mod:`jaxdyn.tree`), applied to the
        rotation coordinates (cos, sin; a unit quaternion) that every entry of E reads.
    Returns:
      E (n, 3, 3, ...), r (n, 3, ...): XJ (parent-side joint frame -> child frame); S
      (n, 6, NV[t], ...) angular-first, constant in the child frame.
    """
    dt = qj.dtype
    z = jnp.zeros_like(qj[:, :1, ...].sum(1) + axis[:, 0])            # (n, ...) zeros
    z3 = jnp.stack([z, z, z], 1)
    eye = lambda: _axis_E(z3, 1 + z, z)                                # identity E (n, 3, 3, ...)
    col = lambda top, bottom: jnp.concatenate([top, bottom], 1)[:, :, None]
    if t == FIXED:
        return eye(), z3, jnp.zeros((qj.shape[0], 6, 0) + z.shape[1:], dt)
    if t in (REVOLUTE, HELICAL):
        E = _axis_E(axis, *keep((jnp.cos(qj[:, 0]), jnp.sin(qj[:, 0]))))
        if t == REVOLUTE:
            return E, z3, col(axis, 0 * axis)
        return E, (pitch * qj[:, 0])[:, None] * axis, col(axis, pitch[:, None] * axis)
    if t == REVOLUTE_UB:
        cs = keep(_unit(qj))
        return _axis_E(axis, cs[:, 0], cs[:, 1]), z3, col(axis, 0 * axis)
    if t == PRISMATIC:
        return eye(), qj[:, :1] * axis, col(0 * axis, axis)
    if t == SPHERICAL:
        return _quat_E(keep(_unit(qj))), z3, _constant_S({(0, 0): 1, (1, 1): 1, (2, 2): 1}, qj.shape[0], qj) + 0 * z[:, None, None]
    if t == FREE:
        S = _constant_S({(3, 0): 1, (4, 1): 1, (5, 2): 1, (0, 3): 1, (1, 4): 1, (2, 5): 1}, qj.shape[0], qj)
        return _quat_E(keep(_unit(qj[:, 3:7]))), qj[:, :3] + 0 * z3, S + 0 * z[:, None, None]
    if t == PLANAR:
        cs = keep(_unit(qj[:, 2:4]))
        ez = jnp.stack([z, z, 1 + z], 1)
        S = _constant_S({(3, 0): 1, (4, 1): 1, (2, 2): 1}, qj.shape[0], qj)
        return _axis_E(ez, cs[:, 0], cs[:, 1]), jnp.stack([qj[:, 0], qj[:, 1], z], 1), S + 0 * z[:, None, None]
    raise ValueError(f"unknown joint type {t}")
