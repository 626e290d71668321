"""Partial derivatives of inverse and forward dynamics in Pinocchio's conventions.

``rnea_derivatives`` / ``aba_derivatives`` return what Pinocchio's ``computeRNEADerivatives``
/ ``computeABADerivatives`` return: the Jacobians of tau = RNEA(q, qd, qdd) and of
qdd = ABA(q, qd, tau) with respect to q (in the tangent space at q: columns are derivatives
along ``jaxdyn.integrate(model, q, e_j t)`` at t = 0, so (nv, nv) for every joint type,
quaternions included) and to qd, plus M (resp. M^-1 = d qdd / d tau).

Method "analytic" (default): the O(n^2) algorithm of Carpentier & Mansard (2018), with
every term written once for one state and for batch-last chunks
(:mod:`jaxdyn.dynamics.derivative_sweeps`).  Every body's velocity v_i, acceleration a_i
(gravity as the base acceleration), spatial inertia I_i and every dof's motion subspace
column J_k are taken in one fixed frame per tree (the root body's frame at q; see
:mod:`jaxdyn.dynamics.crba` for why not the world); v and a are sums over the dofs that move
a body.  Moving joint k by its tangent displaces its whole subtree rigidly by J_k, which
gives, with p = parent of k's body,

    u_k    = v_p x J_k                          (d v_j / d q_k = J_k x v_j + u_k)
    dA_q,k = a_p x J_k + v_p x u_k              (d a_j / d q_k = J_k x a_j + dA_q,k + u_k x v_j)
    dA_v,k = v_k x J_k + u_k                    (d a_j / d qd_k = dA_v,k - v_j x J_k)

and with B_j = v_j x* I_j - I_j v_j x + (. x* h_j), h_j = I_j v_j (the derivative of
f_j = I_j a_j + v_j x* h_j along a change u of v_j) and the subtree sums IC, BC, F of I, B, f:

    d tau_c / d q_k  = J_c^T (IC_d dA_q,k + BC_d u_k) + [c strictly above k] J_c^T (J_k x* F_k)
    d tau_c / d qd_k = J_c^T (IC_d dA_v,k + BC_d J_k)
    M_ck             = J_c^T IC_d J_k

where d is the deeper of the two bodies (of dofs c and k; the terms vanish unless one is an
ancestor of the other).  External forces enter f as -f_ext.  One given in a body's frame
turns with the body, as I_j a_j does; one given in world coordinates does not, so its subtree
sums Fw leave the last term of d tau / d q and add J_k^T (J_c x* Fw_d) where k is at or above c
(J_c turns under a fixed force).  All S are constant in the child frame (``jaxdyn.model.joints``), so
d J_c / d q_k = J_k x J_c for k above c.  Per-body terms are O(n); the pairwise assembly is
one masked (nv, nv) product per matrix.  ABA's derivatives follow from RNEA's (Carpentier &
Mansard, Sec. IV): d qdd / d x = -M^-1 d tau / d x at qdd = ABA(q, qd, tau); here qdd =
M^-1 (tau - h) with h and M from the same terms (h: the joint forces at qdd = 0) and M^-1 by
nested Schur complements over the tree's branches (:mod:`jaxdyn.dynamics.tree_inverse`; for a
traced topology, e.g. a stack's lanes, Gauss-Jordan sweeps on all of M); no LAPACK call, NaN
where M is not positive definite.

Method "autodiff": reverse-mode automatic differentiation of ``rnea`` / ``aba`` through the
tangent map (nv vector-Jacobian products through the scans), kept as the independent
reference for the analytical sweeps.

Both are written once for one state and a batch-last chunk; ``jax.vmap`` of the public
functions runs chunks (:mod:`jaxdyn.batching`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..model.configuration import integrate
from ..model.model import Model

METHODS = ("analytic", "autodiff")


def state_jacobians(f, model: Model, q, qd):
    """(d f / d q in the tangent space at q, d f / d qd) of f(q, qd) (nv,), both (nv, nv), by one
    reverse-mode Jacobian over the stacked tangent (dq, dqd): nv vector-Jacobian products."""
    nv = model.nv
    z = jnp.zeros(2 * nv, jnp.result_type(qd))
    J = jax.jacrev(lambda x: f(integrate(model, q, x[:nv]), qd + x[nv:]))(z)
    return J[:, :nv], J[:, nv:]
