"""A closed model's constraint rows (see :mod:`jaxdyn.constraints.dynamics` for the equations):
residual r(q), Jacobian K, bias k = K-dot qd and the Delassus matrix K M^-1 K^T, from one
kinematics pass over the contact frames (:func:`contact_frames`).  World-aligned axes
(Pinocchio's LOCAL_WORLD_ALIGNED), rows [linear; angular]."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..dynamics.opspace import opspace_inverse_inertia
from ..kinematics import frame_terms
from ..model.model import check_state
from ..spatial.rotations import log3
from .model import ClosedModel


def contact_frames(cm, q, qd=None):
    """Pose / Jacobian / velocity / classical bias acceleration of every contact frame from one
    kinematics pass (:func:`jaxdyn.kinematics.frame_terms`; velocities and accelerations only
    with ``qd``).  Returns get(want) ("pose" | "jac" | "vel" | "acc") -> side(i, "a" | "b") ->
    that frame's value for constraint i (world-fixed frames b: their pose, zero motion)."""
    m = cm.model
    frames = frame_ids(cm)
    col = {f: j for j, f in enumerate(frames)}
    ft = frame_terms(m, q, qd, frames, "local_world_aligned")
    dt = jnp.result_type(q)

    def get(want):
        vals = {"pose": (ft.R, ft.p), "jac": ft.J, "vel": ft.v, "acc": ft.a}[want]

        def side(i, s):
            f = (cm.frames_a if s == "a" else cm.frames_b)[i]
            if f >= 0:
                return jax.tree_util.tree_map(lambda x: x[col[f]], vals)
            if want == "pose":
                return cm.world_R[i].astype(dt), cm.world_p[i].astype(dt)
            return jnp.zeros((6, m.nv), dt) if want == "jac" else jnp.zeros(6, dt)
        return side
    return get


def frame_ids(cm):
    """The contact frames' indices, sorted, without the world (-1)."""
    return sorted({f for f in cm.frames_a + cm.frames_b if f >= 0})


def _frame_rows(cm, i, x6, pose, vel=None):
    """Rows of constraint i from a world-aligned 6-vector (or (6, n) matrix) x6 [linear; angular]
    of frame A relative to frame B: point -> linear rows; weld -> all; revolute / subspace ->
    phi^T R_a^T x6 in frame A's axes (``pose`` = :func:`contact_frames`(...)("pose")).  With
    ``vel`` (the frames' velocities) x6 is the bias acceleration and the term of the rotating
    axes, -phi^T R_a^T [omega_a x dv; omega_a x domega], is added."""
    kind = cm.kinds[i]
    if kind == "point":
        return x6[:3]
    if kind == "weld":
        return x6
    Ra, _ = pose(i, "a")
    if vel is not None:
        va, vb = vel(i, "a"), vel(i, "b")
        w, dv = va[3:], va - vb
        x6 = x6 - jnp.concatenate([jnp.cross(w, dv[:3]), jnp.cross(w, dv[3:])])
    Rt = Ra.T
    local = jnp.concatenate([Rt @ x6[:3], Rt @ x6[3:]]) if x6.ndim == 1 else \
        jnp.concatenate([Rt @ x6[:3], Rt @ x6[3:]], 0)
    return cm.phis[i].astype(local.dtype).T @ local


def residual_of(cm, get):
    """:func:`constraint_residual` from the contact frames ``get`` (:func:`contact_frames`)."""
    pose = get("pose")
    out = []
    for i in range(len(cm.kinds)):
        (Ra, pa), (Rb, pb) = pose(i, "a"), pose(i, "b")
        out.append(_frame_rows(cm, i, jnp.concatenate([pa - pb, log3(Ra @ Rb.T)]), pose))
    return jnp.concatenate(out)


def jacobian_of(cm, get):
    """:func:`constraint_jacobian` from the contact frames ``get`` (:func:`contact_frames`)."""
    jac, pose = get("jac"), get("pose")
    return jnp.concatenate([_frame_rows(cm, i, jac(i, "a") - jac(i, "b"), pose) for i in range(len(cm.kinds))])


def bias_of(cm, get):
    """:func:`constraint_bias` from the contact frames ``get`` (:func:`contact_frames` with qd)."""
    acc, pose, vel = get("acc"), get("pose"), get("vel")
    return jnp.concatenate([_frame_rows(cm, i, acc(i, "a") - acc(i, "b"), pose,
                                        vel if cm.kinds[i] in ("revolute", "subspace") else None)
                            for i in range(len(cm.kinds))])


def delassus_of(cm, Om, get):
    """S Om S^T: the contact frames' operational-space inverse inertia Om (6 F, 6 F) mapped by
    each constraint's rows."""
    col = {f: i for i, f in enumerate(frame_ids(cm))}
    eye = jnp.eye(Om.shape[0], dtype=Om.dtype)
    sel = lambda f: eye[6 * col[f]: 6 * col[f] + 6] if f >= 0 else jnp.zeros_like(eye[:6])
    pose = get("pose")
    S = jnp.concatenate([_frame_rows(cm, i, sel(cm.frames_a[i]) - sel(cm.frames_b[i]), pose)
                         for i in range(len(cm.kinds))])
    return S @ Om @ S.T


@jax.jit
def constraint_residual(cm: ClosedModel, q):
    """r(q) (m,): point p_a - p_b; weld [p_a - p_b; log3(R_a R_b^T)] (world axes); revolute /
    subspace: phi^T R_a^T of the weld residual (frame A's axes; zero when the constraint holds)."""
    check_state(cm.model, q=q)
    return residual_of(cm, contact_frames(cm, q))


@jax.jit
def constraint_jacobian(cm: ClosedModel, q):
    """K (m, nv): constraint rows (see :mod:`jaxdyn.constraints.dynamics`)."""
    check_state(cm.model, q=q)
    return jacobian_of(cm, contact_frames(cm, q))


@jax.jit
def delassus(cm: ClosedModel, q):
    """K M^-1 K^T (m, m) without M^-1: the contact frames' operational-space inverse inertia
    (Rodriguez and Kreutz's O(N) recursion (6.10), cross terms included) mapped by each
    constraint's rows, K = sum of row maps of (J_a - J_b)."""
    check_state(cm.model, q=q)
    Om = opspace_inverse_inertia(cm.model, q, frame_ids(cm), "local_world_aligned")     # (6 F, 6 F)
    return delassus_of(cm, Om, contact_frames(cm, q))


@jax.jit
def constraint_bias(cm: ClosedModel, q, qd):
    """k = K-dot qd (m,): the constraint's acceleration at qdd = 0 (classical accelerations of
    the contact frames, plus the rotation of frame A's axes for revolute / subspace rows)."""
    check_state(cm.model, q=q, qd=qd)
    return bias_of(cm, contact_frames(cm, q, qd))


def rows_target(cm, get, qd, K, stabilization):
    """The right side of K qdd = rhs: -k (q, qd), minus 2 alpha K qd + beta^2 r with Baumgarte
    gains (``get``: :func:`contact_frames` at (q, qd))."""
    rhs = -bias_of(cm, get)
    if stabilization is not None:
        alpha, beta = stabilization
        rhs = rhs - 2.0 * alpha * (K @ qd) - beta ** 2 * residual_of(cm, get)
    return rhs
