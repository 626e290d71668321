"""The Schur-complement solve of a closed model's constrained dynamics on one ABA
factorization, and its implicit derivative.

With b = tau - damping qd - h(q, qd) and the articulated-body factorization of M at q
(:func:`jaxdyn.dynamics.aba.aba_factor`; M^-1 applied by :func:`~jaxdyn.dynamics.aba.minv_apply`):

    qdd_free = M^-1 b,   A = K M^-1 K^T,   A lam = rhs - K qdd_free,   qdd = qdd_free + M^-1 K^T lam

where A comes from the same factorization by Rodriguez and Kreutz's operational-space
recursion (1988, (6.10)) and lam from the proximal least-norm solve
(:func:`jaxdyn.constraints.solve.prox_solve`).  The kinematics (K, k, r) come from one pass
over the contact frames (:func:`jaxdyn.constraints.rows.contact_frames`).

Derivative (Carpentier and Mansard 2018's argument, applied to the constrained equations): the
solution satisfies E = (tau - damping qd - RNEA(q, qd, qdd) + K^T lam, rhs - K qdd) = 0, so

    M dqdd - K^T dlam = dE_1,    K dqdd = dE_2,

dE the differential of E with (qdd, lam) held fixed: one RNEA and one kinematics jvp, then the
same two solves, dlam = A^-1 (dE_2 - K M^-1 dE_1) and dqdd = M^-1 (dE_1 + K^T dlam).  The
passes are never differentiated.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..dynamics.aba import aba_factor, minv_apply
from ..dynamics.common import moving_jvp
from ..dynamics.operator import factors_of
from ..dynamics.opspace import opspace_inverse_inertia_of
from ..dynamics.rnea import rnea_passes
from ..dynamics.slots import slot_factor_of
from ..kinematics import joint_transforms
from .rows import contact_frames, delassus_of, frame_ids, jacobian_of, rows_target
from .solve import prox_eps, prox_solve


class SchurSolution(NamedTuple):
    """qdd (nv,), lam (m,), residual K qdd - rhs (m,), and A = K M^-1 K^T (m, m), which is
    returned for the rank diagnostic and carries no derivative (zero tangent)."""
    qdd: jax.Array
    lam: jax.Array
    residual: jax.Array
    A: jax.Array


def _equations(stabilization, cm, q, qd, tau, qdd, lam):
    """(E_1, E_2, K, contact frames): the constrained equations' residuals at (qdd, lam), the
    Jacobian and the kinematics pass they came from (:func:`~jaxdyn.constraints.rows.contact_frames`)."""
    model = cm.model
    get = contact_frames(cm, q, qd)
    K = jacobian_of(cm, get)
    e1 = tau - model.damping * qd - rnea_passes(model, q, qd, qdd)[0] + K.T @ lam
    return e1, rows_target(cm, get, qd, K, stabilization) - K @ qdd, K, get


def _solve(stabilization, cm, q, qd, tau):
    """The solution and what its derivative reuses: (SchurSolution, (ABA factor, K, eps))."""
    model = cm.model
    z = jnp.zeros_like(qd)
    b, rhs, K, get = _equations(stabilization, cm, q, qd, tau, z, jnp.zeros(sum(cm.rows), qd.dtype))
    fac = aba_factor(model, *joint_transforms(model, q))
    Om = opspace_inverse_inertia_of(model, factors_of(slot_factor_of(model, fac)), jnp.asarray(frame_ids(cm)),
                                    "local_world_aligned")
    A = delassus_of(cm, Om, get)
    eps = prox_eps(jnp.diagonal(A))
    qdd_free = minv_apply(model, q, fac, b)
    lam = prox_solve(A, rhs - K @ qdd_free, eps)
    qdd = qdd_free + minv_apply(model, q, fac, K.T @ lam)
    return SchurSolution(qdd, lam, K @ qdd - rhs, A), (fac, K, eps)


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def schur_solve(stabilization, cm, q, qd, tau) -> SchurSolution:
    """The constrained accelerations and forces of the closed model ``cm`` at (q, qd, tau) by
    the Schur complement on one ABA factorization (module docstring); ``stabilization`` None
    or (alpha, beta), static.  Arguments already checked and of one dtype."""
    return _solve(stabilization, cm, q, qd, tau)[0]


@partial(schur_solve.defjvp, symbolic_zeros=True)
def _schur_jvp(stabilization, primals, tangents):
    cm, q, qd, tau = primals
    sol, (fac, K, eps) = _solve(stabilization, *primals)
    _, dE = moving_jvp(lambda *a: _equations(stabilization, *a, sol.qdd, sol.lam)[:2], primals, tangents)
    if dE is None:
        dE = (jnp.zeros_like(sol.qdd), jnp.zeros_like(sol.lam))
    y = minv_apply(cm.model, q, fac, dE[0])
    dlam = prox_solve(sol.A, dE[1] - K @ y, eps)
    dqdd = y + minv_apply(cm.model, q, fac, K.T @ dlam)
    return sol, SchurSolution(dqdd, dlam, K @ dqdd - dE[1], jnp.zeros_like(sol.A))
