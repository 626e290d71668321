"""Saha's UDU^T decomposition of the generalized inertia matrix (Saha 2003, Sec. 2, App. B).

The GIM is ``I = U D U^T`` with U unit upper triangular and D (block) diagonal, obtained by
*reverse* Gaussian elimination (RGE), which runs from the last body to the first and yields,
per body k (Saha's symbols; frame k, Featherstone spatial vectors, angular first):

* M-hat_k   articulated-body inertia (28): M-hat_k = M_k + sum_children B^T M-hat_cc B, with
            M-hat_cc = M-hat_c - psi-hat_c psi_c^T           (``IA`` of ABA)
* psi-hat_k = M-hat_k p_k,  m-hat_k = p_k^T psi-hat_k,  psi_k = psi-hat_k / m-hat_k  (26)-(27)
* U[i, k] = p_i^T psi_ik,  psi_ik = B_ki^T psi_k (i an ancestor of k), D = diag(m-hat)  (25)

and the O(n) forward dynamics in three steps:

A. tau-hat = U^-1 phi (12)-(13):  tau-hat_k = phi_k - p_k^T eta_{k,children},
   eta_k = psi_k tau-hat_k + eta_{k,children},  eta_{p,k} = B^T eta_k      (leaves -> root)
B. tau-tilde = D^-1 tau-hat
C. thdd = U^-T tau-tilde (14)-(15):  thdd_k = tau-tilde_k - psi_k^T mu_{k,p},
   mu_k = p_k thdd_k + mu_{k,p},  mu_{k,p} = B mu_p                          (root -> leaves)

with phi = tau - C qd - g - J^T f_ext from inverse dynamics at thdd = 0 (RNEA).

What changes on trees (Saha treats serial chains): "i + 1" becomes every child of i, so
M-hat and eta_{k,children} sum over children (leaves-to-root sweeps) and mu comes from the
parent; U[i, k] is non-zero only when i is k or an ancestor of k (no fill-in), so U is upper
triangular in the topological order.  Multi-dof joints (spherical, planar, free) make p_k a
6 x n_k block, m-hat_k an n_k x n_k block and D block diagonal (D^-1 is a block solve).

Saha's p_i and B_ij act on twists at the mass centres in a common frame; here the same
products are evaluated with body-frame Plucker transforms (B_ki^T = Xup^T along the path),
which changes the coordinates of psi, eta and mu but not U, D or thdd (the UDU^T
factorization of an SPD matrix with unit U is unique).  :func:`denoc` gives Saha's (2003) own
DeNOC matrices (Eqs. 2-5) for comparison.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..kinematics.bodies import dof_columns
from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from .operator import unit_upper_factor     # Rodriguez and Kreutz's (1988) (1 + H Phi L) is Saha's U
from .registry import register_method
from .rnea import rnea_passes
from .slots import dof_blocks, dof_mask, per_body, scatter_dofs, slot_factor


class SahaFactors(NamedTuple):
    """Per-body RGE quantities (leading axis nb): p (6, n_k), Xup as 6x6 ``B`` (motion),
    M-hat (6, 6), psi-hat (6, n_k), m-hat and its inverse (n_k, n_k), psi (6, n_k)."""
    p: jax.Array
    B: jax.Array
    M_hat: jax.Array
    psi_hat: jax.Array
    m_hat: jax.Array
    m_hat_inv: jax.Array
    psi: jax.Array


@jax.jit
def saha_factors(model: Model, q) -> SahaFactors:
    """The RGE recursion (26)-(28) at q (the articulated-inertia sweep of :func:`aba_factor`)."""
    check_state(model, q=q)
    fac = slot_factor(model, q)
    return SahaFactors(fac.S, fac.X6, fac.IA, fac.U, fac.D, fac.Dinv, fac.UDinv)


def _step_A(eta_children, x, keep=None):
    """(12)-(13): tau-hat_k = phi_k - p_k^T eta_{k,children}; eta_k = psi_k tau-hat_k + eta_{k,ch}."""
    p, B, psi, phi = x
    tau_hat = phi - p.T @ eta_children
    eta = psi @ tau_hat + eta_children
    return B.T @ eta, tau_hat


def _step_C(mu_p, x, keep=None):
    """(14)-(15): mu_{k,p} = B mu_p; thdd_k = tau-tilde_k - psi_k^T mu_{k,p}; mu_k = p thdd + mu_{k,p}."""
    p, B, psi, tau_tilde = x
    mu_kp = B @ mu_p
    thdd = tau_tilde - psi.T @ mu_kp
    return p @ thdd + mu_kp, thdd


def udut_solve(model: Model, Fs: SahaFactors, phi):
    """thdd = U^-T D^-1 U^-1 phi by steps A, B, C.  phi (nv,) -> (nv,)."""
    mask = dof_mask(model)
    phib = per_body(model, phi) * mask
    dt = Fs.M_hat.dtype
    _, tau_hat = backward_sweep(_step_A, model, jnp.zeros((model.nb, 6), dt), (Fs.p, Fs.B, Fs.psi, phib))
    tau_tilde = jnp.einsum("kij,kj->ki", Fs.m_hat_inv, tau_hat.bodies())       # step B
    _, thdd = forward_sweep(_step_C, model, jnp.zeros(6, dt), (Fs.p, Fs.B, Fs.psi, tau_tilde))
    return scatter_dofs(model, thdd.bodies() * mask)


@jax.jit
def udut_forward(model: Model, q, phi):
    """Saha's O(n) forward dynamics for a given phi = tau - C qd - g (the scope of Table I):
    q (nq,), phi (nv,) -> thdd (nv,)."""
    check_state(model, q=q, tau=phi)
    return udut_solve(model, saha_factors(model, q), phi)


@register_method("udut")
def udut_fd(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """``forward_dynamics(method="udut")``: phi from RNEA at thdd = 0, then steps A, B, C."""
    phi = tau - rnea_passes(model, q, qd, jnp.zeros_like(qd), f_ext, gravity, f_ext_frame)[0]
    return udut_forward(model, q, phi)


@jax.jit
def udut(model: Model, q):
    """Dense factors (U, D), each (nv, nv), with I(q) = U D U^T (armature included in D).

    U is unit upper triangular (topological dof order); U[i, k] = p_i^T B_ki^T psi_k for i an
    ancestor of k (25), else 0.  D is diagonal for 1-dof joints, block diagonal otherwise.
    """
    check_state(model, q=q)
    Fs = saha_factors(model, q)
    Bt = jnp.swapaxes(Fs.B, -1, -2)
    U = unit_upper_factor(model, Fs.p, Bt, Bt @ Fs.psi)
    return U, dof_blocks(model, Fs.m_hat)


@jax.jit
def udut_inverse(model: Model, q):
    """The explicit inverse I^-1 = U^-T D^-1 U^-1 (Saha [21]), (nv, nv).

    Column j is steps A, B, C applied to e_j (O(n) each), so no general matrix inverse is
    taken.
    """
    check_state(model, q=q)
    Fs = saha_factors(model, q)
    Mi = jax.vmap(lambda e: udut_solve(model, Fs, e))(jnp.eye(model.nv, dtype=Fs.M_hat.dtype)).T
    return 0.5 * (Mi + Mi.T)


# -- Saha's (2003) DeNOC matrices (Eqs. 2-6), dense ----------------------------------------------

class DeNOC(NamedTuple):
    """Saha's matrices in world coordinates with twists t_i = [omega_i; v_Ci] at the mass
    centres: N_l (6nb, 6nb) with blocks B_ij, N_d (6nb, nv) with blocks p_i, M (6nb, 6nb)
    = diag(M_i), M_i = [[I_i (about C_i), 0], [0, m_i 1]] (5); t = N_l N_d thd, I = N_d^T N_l^T M N_l N_d (2)."""
    N_l: jax.Array
    N_d: jax.Array
    M: jax.Array
    c: jax.Array      # (nb, 3) mass centres in world


def _Bmat(cij):
    """B_ij = [[1, 0], [C_ij, 1]] with C_ij = cross-product tensor of c_ij = c_j - c_i (5)."""
    Z, E = jnp.zeros((3, 3), cij.dtype), jnp.eye(3, dtype=cij.dtype)
    return jnp.block([[E, Z], [sp.skew(cij), E]])


def _denoc_blocks(model: Model, q):
    """Blocks of the DeNOC matrices: B (nb, nb, 6, 6) with B[i, j] = B_ij if j is i or an
    ancestor of i (else 0), P (nb, 6, nv) = p_i in the columns of body i's dofs, M_i (nb, 6, 6)
    and the mass centres c (nb, 3), all in world coordinates."""
    Xup, S = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    nb, dt = model.nb, q.dtype
    R = jnp.swapaxes(X0.E[:-1], -1, -2)                         # body -> world rotation
    c = X0.r[:-1] + jnp.einsum("kij,kj->ki", R, model.com)      # mass centres (world)
    J0 = dof_columns(model, X0, S)                              # (nv, 6) at the world origin
    # p_i: joint motion as [omega; v_Ci] (velocity of the mass centre): v_C = v_O + omega x c
    cd = c[model.topology.dof_body]
    p = jnp.concatenate([J0[:, :3], J0[:, 3:] + jnp.cross(J0[:, :3], cd)], 1)          # (nv, 6)
    anc = model.topology.ancestors                              # anc[i, j]: j is i or an ancestor
    B = jax.vmap(lambda ci: jax.vmap(lambda cj: _Bmat(cj - ci))(c))(c) * anc[:, :, None, None]
    own = (model.topology.dof_body[None, :] == np.arange(nb)[:, None]).astype(dt)      # (nb, nv)
    P = own[:, None, :] * p.T[None]                                                    # (nb, 6, nv)
    Ic = 0.5 * (model.inertia + jnp.swapaxes(model.inertia, -1, -2))   # symmetric part, as mcI
    Ib = R @ Ic @ jnp.swapaxes(R, -1, -2)
    Z = jnp.zeros((nb, 3, 3), dt)
    Mi = jnp.concatenate([jnp.concatenate([Ib, Z], 2),
                          jnp.concatenate([Z, model.mass[:, None, None] * jnp.eye(3, dtype=dt)[None]], 2)], 1)
    return B, P, Mi, c


@jax.jit
def denoc(model: Model, q) -> DeNOC:
    """The DeNOC matrices of Eqs. (2)-(5), generalised to trees (B_ij for j an ancestor of i)."""
    check_state(model, q=q)
    B, P, Mi, c = _denoc_blocks(model, q)
    nb, dt = model.nb, Mi.dtype
    N_l = B.transpose(0, 2, 1, 3).reshape(6 * nb, 6 * nb)
    M = jnp.einsum("ij,iab->iajb", jnp.eye(nb, dtype=dt), Mi).reshape(6 * nb, 6 * nb)
    return DeNOC(N_l, P.reshape(6 * nb, model.nv), M, c)


@jax.jit
def gim_denoc(model: Model, q):
    """The GIM from Eq. (6): i_ij = p_i^T M~_i B_ij p_j (j an ancestor of i, or i), with the
    composite-body inertias M~_i = M_i + sum_children B_ci^T M~_c B_ci accumulated leaves to
    root.  Armature added on the diagonal.  (nv, nv)."""
    check_state(model, q=q)
    B, P, Mi, c = _denoc_blocks(model, q)
    cpar = jnp.where((model.parent >= 0)[:, None], c[np.maximum(model.parent, 0)], c)

    def step(Mt, x, keep=None):
        ci, cp = x
        Bip = _Bmat(cp - ci)                  # B_{i, parent}: t_i = B t_parent + p_i thd_i
        return Bip.T @ Mt @ Bip, Mt
    _, Mtil = backward_sweep(step, model, Mi, (c, cpar))
    eye = jnp.eye(model.nb, dtype=P.dtype)
    # (6): block (i, j) = p_i^T M~_i B_ij p_j, j a strict ancestor of i (lower part) or j = i
    Mtil = Mtil.bodies()
    low = jnp.einsum("iak,iab,ijbc,ij,jcl->kl", P, Mtil, B, 1.0 - eye, P)
    dia = jnp.einsum("iak,iab,ibl->kl", P, Mtil, P)
    Mfull = low + low.T + dia
    return Mfull + jnp.diag(model.armature)
