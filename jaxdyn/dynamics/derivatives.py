"""Partial derivatives of inverse and forward dynamics in Pinocchio's conventions.

``rnea_derivatives`` / ``aba_derivatives`` return what Pinocchio's ``computeRNEADerivatives``
/ ``computeABADerivatives`` return: the Jacobians of tau = RNEA(q, qd, qdd) and of
qdd = ABA(q, qd, tau) with respect to q (in the tangent space at q: columns are derivatives
along ``jaxdyn.integrate(model, q, e_j t)`` at t = 0, so (nv, nv) for every joint type,
quaternions included) and to qd, plus M (resp. M^-1 = d qdd / d tau).

Method "analytic" (default): the O(n^2) algorithm of Carpentier & Mansard (2018).  One pass
gives every body's velocity v_i, acceleration a_i (gravity as the base acceleration), spatial
inertia I_i and motion subspace J_i in one fixed frame per tree (the root body's frame at q;
see :mod:`jaxdyn.dynamics.crba` for why not the world).  Moving joint k by its tangent
displaces its whole subtree rigidly by J_k, which gives, with p = parent of k's body,

    u_k    = v_p x J_k                          (d v_j / d q_k = J_k x v_j + u_k)
    dA_q,k = a_p x J_k + v_p x u_k              (d a_j / d q_k = J_k x a_j + dA_q,k + u_k x v_j)
    dA_v,k = v_k x J_k + u_k                    (d a_j / d qd_k = dA_v,k - v_j x J_k)

and with B_j = v_j x* I_j - I_j v_j x + (. x* h_j), h_j = I_j v_j (the derivative of
f_j = I_j a_j + v_j x* h_j along a change u of v_j) and the subtree sums IC, BC, F of I, B, f:

    d tau_c / d q_k  = J_c^T (IC_d dA_q,k + BC_d u_k) + [c strictly above k] J_c^T (J_k x* F_k)
    d tau_c / d qd_k = J_c^T (IC_d dA_v,k + BC_d J_k)
    M_ck             = J_c^T IC_d J_k

where d is the deeper of the two bodies (of dofs c and k; the terms vanish unless one is an
ancestor of the other).  All S are constant in the child frame (``jaxdyn.model.joints``), so
d J_c / d q_k = J_k x J_c for k above c.  Per-body terms are O(n); the pairwise assembly is
one masked (nv, nv) product per matrix.  ABA's derivatives follow from RNEA's (Carpentier &
Mansard, Sec. IV): d qdd / d x = -M^-1 d tau / d x at qdd = ABA(q, qd, tau).

Method "autodiff": reverse-mode automatic differentiation of ``rnea`` / ``aba`` through the
tangent map (nv vector-Jacobian products through the scans), kept as the independent
reference for the analytical sweeps.

Batches: ``derivatives_batch`` runs any of these functions over a batch in vmapped chunks
(``lax.map(..., batch_size=chunk)``), so memory is bounded by ``chunk`` states.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from .._typing import Configuration, JointMatrix, Tangent
from .. import spatial as sp
from ..errors import ArgumentError, ShapeError
from ..kinematics import ancestors, body_velocities, motion_subspaces_world, root_transforms
from ..model.configuration import integrate
from ..model.model import Model, check_state
from ..tree import parent_slots
from .aba import aba, aba_factor, aba_solve, velocity_terms
from .common import body_inertias, dof_ancestry, dof_mask, dof_owner, gravity_acceleration, with_zero_body
from .minv import minv, minv_from_factor
from .crba import crba
from .rnea import rnea

METHODS = ("analytic", "autodiff")


def _check_method(method):
    if method not in METHODS:
        raise ArgumentError(f"method must be one of {METHODS}, got {method!r}")


def _state_jacobians(f, model, q, qd):
    """(d f / d q in the tangent at q, d f / d qd) of f(q, qd) (nv,), both (nv, nv), by one
    reverse-mode Jacobian over the stacked tangent (dq, dqd): nv vector-Jacobian products.

    (Forward mode, ``jax.jacfwd``, aborted the XLA:CPU compiler -- a CHECK on a dot output
    layout in its dot emitter, jaxlib 0.9.2 to 0.10.2 -- for some models passed as traced
    arguments; reverse mode compiled on every model tried.)
    """
    nv = model.nv
    z = jnp.zeros(2 * nv, jnp.result_type(qd))
    J = jax.jacrev(lambda x: f(integrate(model, q, x[:nv]), qd + x[nv:]))(z)
    return J[:, :nv], J[:, nv:]


def _mh(h):
    """6x6 matrix of u -> u x* h (h a force, angular-first)."""
    n, f = sp.skew(h[:3]), sp.skew(h[3:])
    return -jnp.block([[n, f], [f, jnp.zeros_like(f)]])


def _body_terms(model: Model, q, qd, qdd, anc, gravity=None):
    """Per-body terms of the analytical derivatives, in each tree's root frame at q.
    ``anc``: :func:`jaxdyn.kinematics.ancestors` of the model.

    Returns J (nb, 6, k) (padded slots 0), u, dAq, dAv (nb, 6, k), and the subtree sums
    IC (nb, 6, 6), BC (nb, 6, 6), F (nb, 6).
    """
    a0 = gravity_acceleration(model, gravity)
    v, a, Xup, S = body_velocities(model, q, qd, qdd, a0)
    Xr = root_transforms(model, Xup)
    X = sp.Transform(Xr.E[:-1], Xr.r[:-1])
    to_root = jax.vmap(sp.apply_motion_inv)
    ov, oa = to_root(X, v[:-1]), to_root(X, a[:-1])
    J = motion_subspaces_world(model, Xr, S) * dof_mask(model)[:, None, :]
    I = jax.vmap(sp.inertia.to_matrix)(jax.vmap(sp.inertia.transform_to_parent)(X, body_inertias(model)))
    root = (model.parent < 0)[:, None]
    par = parent_slots(model)
    vp = with_zero_body(ov)[par]                                       # 0 at roots
    ap = jnp.where(root, jax.vmap(sp.apply_motion)(Xup, jnp.broadcast_to(a0, ov.shape)),
                   with_zero_body(oa)[par])                            # -g in root coordinates
    crm = jax.vmap(sp.crm)
    Cp, Cv = crm(vp), crm(ov)
    u = Cp @ J
    dAq = crm(ap) @ J + Cp @ u
    dAv = Cv @ J + u
    h = jnp.einsum("bij,bj->bi", I, ov)
    Fv = -jnp.swapaxes(Cv, 1, 2)                                       # v x* (force cross product)
    f = jnp.einsum("bij,bj->bi", I, oa) + jnp.einsum("bij,bj->bi", Fv, h)
    B = Fv @ I - I @ Cv + jax.vmap(_mh)(h)
    sub = anc[:-1]                                                     # sub[j, i]: i is j or above j
    IC, BC = (jnp.einsum("ji,jab->iab", sub, x) for x in (I, B))
    F = jnp.einsum("ji,ja->ia", sub, f)
    return J, u, dAq, dAv, IC, BC, F


def _analytic_rnea_derivatives(model: Model, q, qd, qdd, gravity=None):
    """(dtau_dq, dtau_dqd, M) by Carpentier & Mansard's sweeps (module docstring)."""
    ancb = ancestors(model)
    J, u, dAq, dAv, IC, BC, F = _body_terms(model, q, qd, qdd, ancb, gravity)
    body, col = dof_owner(model)
    Jd, ud, dAqd, dAvd = (with_zero_body(x)[body, :, col] for x in (J, u, dAq, dAv))   # (nv, 6)
    ICd, BCd = with_zero_body(IC)[body], with_zero_body(BC)[body]                  # (nv, 6, 6)
    Fd = with_zero_body(F)[body]                                                    # (nv, 6)
    anc, same = dof_ancestry(model, ancb, body)                        # anc[c, k]: k's body is c's or above
    above = anc.T - same                                               # above[c, k]: c's body strictly above k's
    mv = partial(jnp.einsum, "nij,nj->ni")
    W = mv(ICd, Jd)                                                    # IC_c J_c
    V = mv(jnp.swapaxes(BCd, 1, 2), Jd)                                # BC_c^T J_c
    crf = jax.vmap(sp.crf)(Jd)
    Pq = mv(ICd, dAqd) + mv(BCd, ud) + mv(crf, Fd)                     # d F_k / d q_k (subtree of k)
    Pv = mv(ICd, dAvd) + mv(BCd, Jd)
    dq = (Jd @ Pq.T) * above + (W @ dAqd.T + V @ ud.T) * anc
    dv = (Jd @ Pv.T) * above + (W @ dAvd.T + V @ Jd.T) * anc
    Mb = W @ Jd.T
    low = Mb * (anc - same)
    M = low + low.T + Mb * same + jnp.diag(model.armature)
    return dq, dv, M


@partial(jax.jit, static_argnames=("method",))
def rnea_derivatives(model: Model, q: Configuration, qd: Tangent, qdd: Tangent,
                     method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dtau_dq (nv, nv), dtau_dqd (nv, nv), M (nv, nv)) of tau = RNEA(q, qd, qdd).

    dtau_dq is taken in the tangent space at q (Pinocchio's ``computeRNEADerivatives``);
    gravity is included, joint damping is not (as ``rnea``).  ``method``: "analytic"
    (Carpentier & Mansard 2018, O(n^2)) or "autodiff" (reverse mode through ``rnea``).
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    _check_method(method)
    if method == "analytic":
        return _analytic_rnea_derivatives(model, q, qd, qdd)
    dq, dv = _state_jacobians(lambda qq, vv: rnea(model, qq, vv, qdd), model, q, qd)
    return dq, dv, crba(model, q)


@partial(jax.jit, static_argnames=("method",))
def aba_derivatives(model: Model, q: Configuration, qd: Tangent, tau: Tangent,
                    method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dqdd_dq (nv, nv), dqdd_dqd (nv, nv), Minv (nv, nv)) of qdd = ABA(q, qd, tau).

    dqdd_dq is taken in the tangent space at q (Pinocchio's ``computeABADerivatives``);
    dqdd_dtau = Minv.  No joint damping (as ``aba``).  ``method="analytic"``:
    -M^-1 (d tau / d q, d tau / d qd) at qdd = ABA(q, qd, tau) (Carpentier & Mansard 2018);
    "autodiff": reverse mode through ``aba``.
    """
    check_state(model, q=q, qd=qd, tau=tau)
    _check_method(method)
    if method == "analytic":
        fac = aba_factor(model, q)                                     # one factorization for qdd and M^-1
        c, pA = velocity_terms(model, fac.Xup, fac.S, qd)
        qdd = aba_solve(model, fac, c, pA, tau, gravity_acceleration(model))
        Mi = minv_from_factor(model, fac)
        dq, dv, _ = _analytic_rnea_derivatives(model, q, qd, qdd)
        return -Mi @ dq, -Mi @ dv, Mi
    dq, dv = _state_jacobians(lambda qq, vv: aba(model, qq, vv, tau), model, q, qd)
    return dq, dv, minv(model, q)


@partial(jax.jit, static_argnames=("fn", "chunk", "method"))
def derivatives_batch(model: Model, Q, QD, X, fn="aba", chunk=64, method="analytic"):
    """``aba_derivatives`` (fn="aba") or ``rnea_derivatives`` (fn="rnea") of B states at once.

    Q (B, nq), QD (B, nv), X (B, nv) (tau, resp. qdd).  Returns the three (B, nv, nv) arrays.
    Runs vmapped chunks of ``chunk`` states one after the other, so memory stays bounded
    (see the module docstring); the result equals ``vmap`` of the per-state function.
    """
    funcs = {"aba": aba_derivatives, "rnea": rnea_derivatives}
    if fn not in funcs:
        raise ArgumentError(f"fn must be 'aba' or 'rnea', got {fn!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ArgumentError(f"chunk must be a positive int, got {chunk!r}")
    _check_method(method)
    B = jnp.shape(Q)[0] if jnp.ndim(Q) == 2 else None
    for nm, a, n in (("Q", Q, model.nq), ("QD", QD, model.nv), ("X", X, model.nv)):
        if jnp.ndim(a) != 2 or jnp.shape(a) != (B, n):
            raise ShapeError(f"derivatives_batch: {nm} must have shape (B, {n}) for model {model.name!r}, "
                             f"got {jnp.shape(a)}")
    f = funcs[fn]
    return lax.map(lambda x: f(model, *x, method=method), (Q, QD, X), batch_size=min(chunk, B))
