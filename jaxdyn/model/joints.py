"""Joint models: ``jcalc`` returns the joint transform XJ and motion subspace S.

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

import contextlib
import contextvars
from enum import IntEnum

import jax.numpy as jnp

from ..spatial.rotations import quat_to_rot
from ..spatial.transforms import Transform, skew

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


_ELEMENTWISE = contextvars.ContextVar("jaxdyn_elementwise_products", default=False)


@contextlib.contextmanager
def elementwise_products():
    """While tracing inside it, the 3x3 products of the joint transforms are written as
    broadcast-multiply-sums instead of dots: revolute rotations take K^2 = a a^T - |a|^2 1
    instead of K @ K (K = skew(a)), and :func:`jaxdyn.kinematics.joint_transforms` composes
    E_J E_tree elementwise.  Under a vmap over states or models each such dot is a batched
    dot of 3x3 blocks, one per state and body, which XLA:CPU runs as a library call
    (YNNPACK, with the default flags) or a small-dot loop and transposes around it.  The
    batch-last kernels (``jaxdyn.dynamics.batch``) trace their joint transforms inside it:
    ``vmap(aba)`` / ``aba_batch`` 0.85-0.88x on panda, anymal_c, talos_reduced and g1
    (same-process A/B, both jits); a stack's lanes 0.90x (K^2).  One state keeps the dots
    (4 % faster for one talos_reduced state)."""
    token = _ELEMENTWISE.set(True)
    try:
        yield
    finally:
        _ELEMENTWISE.reset(token)


def in_elementwise_products():
    """True while tracing inside :func:`elementwise_products`."""
    return _ELEMENTWISE.get()


def _axis_rot(axis, c, s):
    """Rotation (child axes in parent coordinates) by angle (cos c, sin s) about unit axis."""
    K = skew(axis)
    if _ELEMENTWISE.get():   # |a|^2 as two adds, not a reduce (XLA:CPU hands reductions to YNNPACK)
        n2 = axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]
        KK = axis[:, None] * axis[None, :] - n2 * jnp.eye(3, dtype=axis.dtype)
        return jnp.eye(3, dtype=axis.dtype) + s * K + (1 - c) * KK
    return jnp.eye(3, dtype=axis.dtype) + s * K + (1 - c) * (K @ K)


def _unit(x):
    """x / |x| (x = 0 stays 0).  The rotation coordinates of a joint (a quaternion, a (cos,
    sin) pair) give an orthogonal rotation only at unit norm; normalized here, every
    algorithm sees the same rotation for any q, so the closed forms of one state (which use
    E^T as E^-1 in other places than the sweeps) and the sweeps that the derivative rules
    differentiate are one function of q, on the unit sphere and off it (where a
    finite difference along a direction of R^nq goes)."""
    n2 = jnp.sum(x * x)
    return x / jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))


def _one_col(k, col):
    S = jnp.zeros((6, k), col.dtype)
    return S.at[:, 0].set(col)


def _jcalc_one(t, axis, pitch, qj, k):
    """(E, r, S) of joint type t (a Python int). qj: (nqj,) padded coordinates."""
    dt = axis.dtype
    eye, zero3 = jnp.eye(3, dtype=dt), jnp.zeros(3, dt)
    z3 = jnp.zeros(3, dt)
    if t == FIXED:
        return eye, zero3, jnp.zeros((6, k), dt)
    if t == REVOLUTE or t == HELICAL:
        th = qj[0]
        R = _axis_rot(axis, jnp.cos(th), jnp.sin(th))
        r = pitch * th * axis if t == HELICAL else zero3
        col = jnp.concatenate([axis, pitch * axis if t == HELICAL else z3])
        return R.T, r, _one_col(k, col)
    if t == REVOLUTE_UB:
        R = _axis_rot(axis, *_unit(qj[:2]))
        return R.T, zero3, _one_col(k, jnp.concatenate([axis, z3]))
    if t == PRISMATIC:
        return eye, qj[0] * axis, _one_col(k, jnp.concatenate([z3, axis]))
    if t == SPHERICAL:
        R = quat_to_rot(_unit(qj[:4]))
        S = jnp.zeros((6, k), dt).at[:3, :3].set(eye)
        return R.T, zero3, S
    if t == FREE:
        R = quat_to_rot(_unit(qj[3:7]))
        S = jnp.zeros((6, k), dt).at[3:, :3].set(eye).at[:3, 3:6].set(eye)
        return R.T, qj[:3], S
    if t == PLANAR:
        R = _axis_rot(jnp.array([0.0, 0.0, 1.0], dt), *_unit(qj[2:4]))
        S = jnp.zeros((6, k), dt).at[3, 0].set(1.0).at[4, 1].set(1.0).at[2, 2].set(1.0)
        return R.T, jnp.stack([qj[0], qj[1], 0 * qj[0]]), S
    raise ValueError(f"unknown joint type {t}")


def jcalc(types_present, k, jtype, axis, pitch, qj):
    """Joint transform and motion subspace of one joint.

    Args:
      types_present: static tuple of joint codes that can occur (only these are computed).
      k: static max dofs per joint (columns of S).
      jtype: () int joint code; axis (3,) unit; pitch (); qj (nqj,) padded joint coordinates.
    Returns:
      XJ: Transform (parent-side joint frame -> child frame); S: (6, k), angular-first.
    """
    outs = [(t, _jcalc_one(t, axis, pitch, qj, k)) for t in types_present]
    if len(outs) == 1:
        E, r, S = outs[0][1]
        return Transform(E, r), S
    E, r, S = outs[0][1]
    for t, (Et, rt, St) in outs[1:]:
        sel = jtype == t
        E, r, S = jnp.where(sel, Et, E), jnp.where(sel, rt, r), jnp.where(sel, St, S)
    return Transform(E, r), S
