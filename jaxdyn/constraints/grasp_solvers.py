"""The two solvers of a :class:`~jaxdyn.constraints.grasp.GraspSystem` (its equations are in
:mod:`jaxdyn.constraints.grasp`): Rodriguez and Kreutz's (1988) RCCFD 1 (6.11) with the
non-rigid grasps of their Appendix B, and Lilly and Orin's (1991) Table 1, each on the shared
per-arm terms (:func:`~jaxdyn.constraints.grasp.grasp_terms`)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.common import pd_inverse
from .grasp import (GraspSolution, GraspSystem, chain_blocks, contact_rows, finish_arms, grasp_terms, real_rows)
from .solve import PROX_ITERS, prox_eps, prox_solve


def rccfd_solve(gs: GraspSystem, q, qd, tau, stabilization=None, free_force=None) -> GraspSolution:
    """RCCFD 1 (6.11) with the non-rigid grasps of Appendix B: Omega lam = r + H^T alpha,
    H lam = h (``free_force`` (ell, 3), zero for passive contacts), solved as (b.9d).  A
    singular Omega (dependent contacts, singular arms) gets the proximal least-norm solve of
    :func:`jaxdyn.constraints.solve.prox_solve`."""
    T = grasp_terms(gs, q, qd, tau, stabilization)
    C = contact_rows(gs, T)
    ell = gs.n_arms
    Gs = T.G.reshape(-1, gs.obj.nv)
    Omega = jax.scipy.linalg.block_diag(*[T.Lam_inv[i] for i in range(ell)]) + Gs @ T.Mo_inv @ Gs.T   # (6.11e)
    alpha_obj = jnp.einsum("lij,j->li", T.G, T.obj_f) + T.obj_bias
    r = (C.c - (T.alpha_f - alpha_obj)).reshape(-1)
    if any(k != "weld" for k in gs.kinds) or free_force is not None:
        # (b.7)'s Pi = Omega^-1 - Omega^-1 H^T (H Omega^-1 H^T)^-1 H Omega^-1 in its constrained-space
        # form phi^c (phi^c^T Omega phi^c)^-1 phi^c^T: equal when Omega is invertible, and defined
        # whenever the constrained block is (e.g. 5-DOF legs, whose J M^-1 J^T is singular).
        Phi = jax.scipy.linalg.block_diag(*[C.phi[i] for i in range(ell)])             # (6 ell, 3 ell): H^T
        Phic = jax.scipy.linalg.block_diag(*[C.phic[i] for i in range(ell)])           # (6 ell, 6 ell)
        fh = Phi @ (jnp.zeros(3 * ell, r.dtype) if free_force is None else free_force.reshape(-1))
        rhs = Phic.T @ (r - Omega @ fh)
        Omega = Phic.T @ Omega @ Phic                                                  # the constrained block
        real = real_rows(gs)
        eps = prox_eps(jnp.diagonal(Omega), 1.0 - C.pad_c.reshape(-1))
        lam = fh + Phic @ prox_solve(Omega + jnp.diag(C.pad_c.reshape(-1)), rhs, eps)  # (b.9d)
        Omega = Omega[np.ix_(real, real)]
    else:
        lam = prox_solve(Omega, r, prox_eps(jnp.diagonal(Omega)))                     # (6.11f)
    qdd_o = T.obj_f - T.Mo_inv @ (Gs.T @ lam)
    lam_l = lam.reshape(ell, 6)
    qdd, rel, residual = finish_arms(gs, q, T, C, lam_l, qdd_o)                           # (6.11g-j)
    return GraspSolution(qdd, lam_l, residual, rel, T.vel, C.phi, T.w_obj, Omega, chain_blocks(T, C))


def lilly_orin_solve(gs: GraspSystem, q, qd, tau, stabilization=None, free_force=None) -> GraspSolution:
    """Lilly and Orin's simple closed-chain algorithm (Table 1), chains holding a reference
    member through general joints (phi, phi^c).  With the constrained force mu_k
    (tip force lam_k = phi h_k + phi^c mu_k), A_k = phi^c^T Lambda_k^-1 phi^c and
    B_k = phi^c^T G_k (the grasp's constrained rows of the object), the equations are

        M_o a_o + sum_k B_k^T mu_k = f_o = tau_o - h_o - sum_k G_k^T phi h_k    (object)
        A_k mu_k - B_k a_o = S_k = phi^c^T (c_k + b_k,grasp - alpha_f,k - Lambda_k^-1 phi h_k)

    and Table 1 eliminates mu_k chain by chain: with M_k = A_k^-1,
    (M_o + sum_k B_k^T M_k B_k) a_o = f_o - sum_k B_k^T M_k S_k (45)-(46), then
    mu_k = M_k (S_k + B_k a_o) (47) and the joint accelerations (48).

    A_k is singular where chain k is (a straight leg, a wrist at its singularity, a weld foot
    whose chain has fewer than 5 joints): its M_k does not exist, although the mechanism's
    accelerations do.  So Table 1 runs with the proximal shift M_k = (A_k + diag eps_k)^-1
    (eps_k: :func:`~jaxdyn.constraints.solve.prox_eps` of the diagonal of
    A_k + B_k M_o^-1 B_k^T) as the solver of a refinement on the unshifted equations: a fixed number
    (``PROX_ITERS``) of Table 1 solves on the residuals.  This is the proximal point iteration
    of schur and rccfd, a chain at a time: it converges to the exact accelerations (and to
    least-norm forces where they are not unique) whether or not a chain is singular.
    ``free_force`` h (ell, 3): the known force along the free modes (zero for passive
    contacts).  ``system``: the constrained-space Omega = blockdiag(A_k) + B M_o^-1 B^T on the
    real rows (its diagonal scales the shift; the rank diagnostic; it is never factored)."""
    T = grasp_terms(gs, q, qd, tau, stabilization)
    C = contact_rows(gs, T)
    A = chain_blocks(T, C) - jax.vmap(jnp.diag)(C.pad_c)                     # (ell, 6, 6), zero pads
    B = jnp.einsum("lji,ljk->lik", C.phic, T.G)                               # (ell, 6, nvo)
    Bs = B.reshape(-1, gs.obj.nv)
    Omega = jax.scipy.linalg.block_diag(*[A[i] for i in range(gs.n_arms)]) + Bs @ T.Mo_inv @ Bs.T
    h = jnp.zeros((gs.n_arms, 3), q.dtype) if free_force is None else free_force
    fh = jnp.einsum("lij,lj->li", C.phi, h)                                   # phi h
    S = jnp.einsum("lji,lj->li", C.phic, C.c + T.obj_bias - T.alpha_f - jnp.einsum("lij,lj->li", T.Lam_inv, fh))
    Mo = T.Mo
    f_o = Mo @ T.obj_f - jnp.einsum("lji,lj->i", T.G, fh)                      # tau_o - h_o = M_o a_free
    eps = prox_eps(jnp.diagonal(Omega).reshape(gs.n_arms, 6), 1.0 - C.pad_c)
    Mk = pd_inverse(A + jax.vmap(jnp.diag)(eps + C.pad_c))                 # (A_k + diag eps_k)^-1, unit pads
    M_eff_inv = pd_inverse(Mo + jnp.einsum("lji,ljk,lkm->im", B, Mk, B))     # (45)

    def table1(r_o, r_k):                                                     # (45)-(47) on right sides
        P = jnp.einsum("lij,lj->li", Mk, r_k)
        a_o = M_eff_inv @ (r_o - jnp.einsum("lji,lj->i", B, P))               # (46)
        return a_o, P + jnp.einsum("lij,ljk,k->li", Mk, B, a_o)               # (47)

    a_o, mu = table1(f_o, S)
    for _ in range(PROX_ITERS - 1):                                           # refinement on the residuals
        da, dmu = table1(f_o - Mo @ a_o - jnp.einsum("lji,lj->i", B, mu),
                         S + jnp.einsum("lij,j->li", B, a_o) - jnp.einsum("lij,lj->li", A, mu))
        a_o, mu = a_o + da, mu + dmu
    lam_l = fh + jnp.einsum("lij,lj->li", C.phic, mu)
    qdd, rel, residual = finish_arms(gs, q, T, C, lam_l, a_o)                     # (48)
    real = real_rows(gs)
    return GraspSolution(qdd, lam_l, residual, rel, T.vel, C.phi, T.w_obj, Omega[np.ix_(real, real)],
                         A + jax.vmap(jnp.diag)(C.pad_c))


def rccfd(gs: GraspSystem, q, qd, tau, stabilization=None):
    """RCCFD 1 (6.11), non-rigid grasps by (b.9).  Returns (qdd (nv,), lam (6 ell,),
    residual (6 ell,), Omega on the constrained rows)."""
    s = rccfd_solve(gs, q, qd, tau, stabilization)
    return s.qdd, s.lam.reshape(-1), s.residual, s.system


def lilly_orin(gs: GraspSystem, q, qd, tau, stabilization=None):
    """Lilly and Orin's Type 0 algorithm (arms holding a reference member).  Returns (qdd, lam,
    residual, Omega on the constrained rows)."""
    s = lilly_orin_solve(gs, q, qd, tau, stabilization)
    return s.qdd, s.lam.reshape(-1), s.residual, s.system
