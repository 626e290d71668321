"""The per-body steps of the articulated-body algorithm (Featherstone 2010 Fig. 9; RBDA
Table 7.1), written once for both layouts.

Every step is component-first (:mod:`jaxdyn.spatial.linalg`): it serves one state (vectors
(6,), matrices (6, 6), a joint's S (6, k)) in :func:`jaxdyn.aba` and a batch-last chunk
(vectors (6, C), matrices (6, 6, C)) in :func:`jaxdyn.aba_batch`.  Body frames, angular-first.
``keep`` is applied to intermediate products, each given as a thunk (``keep(lambda: mm(IA, S))``):
the identity for one state (:func:`same` calls it), a fusion barrier in the batch-last
kernels (``jaxdyn.dynamics.batch``), which may compute it inside the barrier
(:func:`jaxdyn.dynamics.common.materialize`).

Step inputs ``x`` hold the body's joint transform Xup as ``E`` (3, 3, ...) and ``r`` (3, ...)
(parent -> body, :class:`jaxdyn.spatial.Transform`) and its motion subspace S (6, k, ...).
"""
from __future__ import annotations

import jax.numpy as jnp

from .. import spatial as sp
from ..spatial.linalg import eye_like, mm, mv, tr
from .common import SMALL_SPD, pd_inverse, spd_inverse_components


def same(x):
    """The identity ``keep`` (one state: nothing to keep from fusing): x, or x() for a thunk."""
    return x() if callable(x) else x


def inverse_pivots(D):
    """Inverse of the joint-space pivots D (k, k, ...) (SPD; NaN where not positive
    definite, as :func:`jaxdyn.dynamics.common.pd_inverse`)."""
    if D.shape[0] <= SMALL_SPD:
        return spd_inverse_components(D)
    if D.ndim == 2:
        return pd_inverse(D)
    return jnp.moveaxis(pd_inverse(jnp.moveaxis(D, (0, 1), (-2, -1))), (-2, -1), (0, 1))


def velocity_step(v_p, x, keep=same):
    """Pass 1: v = Xup v_parent + S qd;  c = v x (S qd);  pA = v x* (I v) - f_ext.

    x = (E, r, S, qd (k, ...), I (6, 6, ...), f_ext (6, ...) [n; f] in the body frame).
    Returns (v, (c, pA))."""
    E, r, S, qd, I6, fx = x
    vJ = mv(S, qd)
    v, vJ = keep(lambda: (sp.apply_motion(sp.Transform(E, r), v_p) + vJ, vJ))
    Iv = keep(lambda: mv(I6, v))
    return v, (sp.cross_motion(v, vJ), sp.cross_force(v, Iv) - fx)


def inertia_step(IA, x, keep=same):
    """Pass 2 (tau-independent part): U = IA S;  D = S^T U + diag(pivot addend);
    Ia = IA - U D^-1 U^T;  the parent receives Xup^T Ia Xup.

    x = (E, r, S, add (k, ...)): ``add`` is the armature on real dof slots and 1 on unused
    ones.  Returns (Xup^T Ia Xup, (U, D, D^-1, U D^-1, Ia))."""
    E, r, S, add = x
    U = keep(lambda: mm(IA, S))
    D = mm(tr(S), U) + add[:, None] * eye_like(S.shape[1], U)
    Dinv = inverse_pivots(D)
    UDinv = keep(lambda: mm(U, Dinv))
    Ia = keep(lambda: IA - mm(UDinv, tr(U)))
    return sp.congruence(sp.Transform(E, r), Ia, keep), (U, D, Dinv, UDinv, Ia)


def bias_step(pA, x, keep=same):
    """Pass 2 (tau-dependent part): u = tau - S^T pA;  pa = pA + Ia c + U D^-1 u;  the parent
    receives Xup^T pa.

    x = (E, r, S, U D^-1, Ia, c, tau (k, ...)).  Returns (Xup^T pa, u)."""
    E, r, S, UDinv, Ia, c, tau = x
    u = keep(lambda: tau - mv(tr(S), pA))
    pa = keep(lambda: pA + mv(Ia, c) + mv(UDinv, u))
    return sp.apply_force_T(sp.Transform(E, r), pa, keep), u


def acceleration_step(a_p, x, keep=same):
    """Pass 3: a' = Xup a_parent + c;  qdd = D^-1 (u - U^T a');  a = a' + S qdd.

    x = (E, r, S, U, D^-1, u, c).  Returns (a, qdd)."""
    E, r, S, U, Dinv, u, c = x
    a1 = keep(lambda: sp.apply_motion(sp.Transform(E, r), a_p) + c)
    qdd = keep(lambda: mv(Dinv, u - mv(tr(U), a1)))
    return a1 + mv(S, qdd), qdd


def rnea_forward_step(parent, x, keep=same):
    """RNEA's pass 1 (Featherstone 2010 Fig. 5) without external forces: v = Xup v_p + S qd;
    a = Xup a_p + S qdd + v x S qd;  f = I a + v x* I v.  parent = (v_p, a_p);
    x = (E, r, S, qd, qdd, I).  Returns ((v, a), f)."""
    v_p, a_p = parent
    E, r, S, qd, qdd, I6 = x
    X = sp.Transform(E, r)
    vJ = keep(mv(S, qd))
    v = keep(sp.apply_motion(X, v_p) + vJ)
    a = keep(sp.apply_motion(X, a_p) + mv(S, qdd) + sp.cross_motion(v, vJ))
    f = mv(I6, a) + sp.cross_force(v, keep(mv(I6, v)))
    return (v, a), f


def rnea_backward_step(f, x, keep=same):
    """RNEA's pass 2: tau = S^T f;  the parent receives Xup^T f.  x = (E, r, S).
    Returns (Xup^T f, tau)."""
    E, r, S = x
    return sp.apply_force_T(sp.Transform(E, r), f, keep), mv(tr(S), f)
