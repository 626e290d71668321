"""Rodriguez-Kreutz spatial-operator algorithms (Rodriguez and Kreutz 1988, Part I, Secs. 4-5, App. B).

Notation of the seed, mapped onto jaxdyn's trees.  The seed numbers links from the tip
(k = 1) to the base (k = N); jaxdyn numbers bodies root first, so Rodriguez and Kreutz's (1988) *causal*
(tip-to-base) sweeps are ``backward_sweep`` and its *anticausal* sweeps are ``forward_sweep``.
On a tree, "k - 1" becomes "every child c of k" and "k + 1" becomes "the parent p(k)".
Every quantity of link k is expressed in body frame k (Featherstone spatial vectors, angular
first):

=============  =========================================================================
seed           here (per body k, leading axis nb)
=============  =========================================================================
M(k)           spatial inertia I_k (6, 6)
H(k)           S_k^T: H^T(k) = S_k (6, n_k), the joint's motion subspace
phi(p, k)      Xup_k^T: force transform body k -> parent (6, 6)
P(k)           Kalman covariance = articulated inertia (4.5), ``P`` (6, 6)
D(k)           H P H^T (+ armature) (4.6), ``D`` (n_k, n_k)
G(k)           P H^T D^-1 (5.12), ``G`` (6, n_k) (frame k)
L(k)           phi(p, k) G(k) (4.6), ``L`` (6, n_k) (frame of the parent)
psi(p, k)      phi(p, k) - L(k) H(k) = Xup^T (1 - G S^T) (4.7), ``psi`` (6, 6)
a(k), b(k)     velocity-product acceleration and bias force (2.19), (2.23)
=============  =========================================================================

Factorization (4.11) ``M = (1 + H Phi L) D (1 + H Phi L)^T`` and inverse (4.16)
``M^-1 = (1 - H Psi L)^T D^-1 (1 - H Psi L)`` hold on trees: (1 + H Phi L) has block (i, j) =
H_i phi(i, j) P_j H_j^T D_j^-1 for i an ancestor of j, so it is block *upper* triangular in
jaxdyn's root-first numbering (Rodriguez and Kreutz's (1988) lower triangular), and it is exactly Saha's U
(``jaxdyn.udut``).  Gravity enters as a fictitious base acceleration, a -> a + E g (3.21).

Mobile base (App. B): a free-flyer root is a joint with H^T = 1 (our free joint's S is a
constant 6x6 permutation, v = [linear; angular] in the body frame), W = V(N), a(N) = 0; every
recursion below is unchanged, D(root) is 6x6.  Spherical and planar joints give 3x3 D blocks.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from .common import body_inertia_matrices, gravity_acceleration
from .registry import register_method, register_minv
from .rnea import rnea_passes
from .slots import bias_terms, dof_blocks, dof_mask, per_body, scatter_dofs, slot_factor, SlotFactor


class InnovationsFactors(NamedTuple):
    """Operators of the innovations factorization, per body (leading axis nb).

    P (6,6) articulated inertia; D, Dinv (n_k, n_k); G (6, n_k) gain in frame k; L (6, n_k)
    gain in the parent frame; H^T = S (6, n_k); phi = Xup^T (6, 6); psi (6, 6) = psi(p, k).
    """
    P: jax.Array
    D: jax.Array
    Dinv: jax.Array
    G: jax.Array
    L: jax.Array
    S: jax.Array
    phi: jax.Array
    psi: jax.Array
    X6: jax.Array   # Xup as a 6x6 motion transform (phi = X6^T)
    joints: tuple   # the joint transforms (for the velocity terms)


@jax.jit
def innovations_factors(model: Model, q) -> InnovationsFactors:
    """The spatial Kalman filter (4.4)-(4.7) at configuration q: P, D, L and psi per body.

    The Riccati recursion (4.5) is the articulated-inertia sweep, so it is computed once by
    :func:`jaxdyn.dynamics.aba.aba_factor` and Rodriguez and Kreutz's (1988) operators are formed from it.
    """
    check_state(model, q=q)
    return factors_unchecked(model, q)


def factors_unchecked(model, q):
    """:func:`factors` without the state check (for callers that validated q already)."""
    return factors_of(slot_factor(model, q))


def factors_of(fac: SlotFactor) -> InnovationsFactors:
    """The operators (4.4)-(4.7) from ABA's factorization in per-body slots
    (:func:`jaxdyn.dynamics.slots.slot_factor`)."""
    G = fac.U @ fac.Dinv                                     # P H^T D^-1
    phi = jnp.swapaxes(fac.X6, -1, -2)
    L = phi @ G
    eye = jnp.eye(6, dtype=G.dtype)
    psi = phi @ (eye[None] - G @ jnp.swapaxes(fac.S, -1, -2))
    return InnovationsFactors(fac.IA, fac.D, fac.Dinv, G, L, fac.S, phi, psi, fac.X6, fac.joints)


# -- the two halves of M^-1 = (1 - H Psi L)^T D^-1 (1 - H Psi L) -------------------------------

def _filter_step(zhat, x, keep=None):
    """(4.20): eps_k = T_k - H_k zhat_k; nu_k = D^-1 eps_k; parent gets psi zhat + L T."""
    S, Dinv, psi, L, T = x
    eps = T - S.T @ zhat
    return psi @ zhat + L @ T, Dinv @ eps


def _smooth_step(lam_p, x, keep=None):
    """(4.22): thdd_k = nu_k - L^T lam_p;  lam_k = psi^T lam_p + H^T nu_k."""
    S, psi, L, nu = x
    return psi.T @ lam_p + S @ nu, nu - L.T @ lam_p


def _filter(model, F, Tb, zhat0=None):
    """Causal sweep nu = D^-1 (1 - H Psi L) T for per-body T (nb, n_k) plus optional extra
    per-body spatial forces zhat0 (nb, 6) entering the filter state (FD3/FD4 bias terms)."""
    init = jnp.zeros((model.nb, 6), F.P.dtype) if zhat0 is None else zhat0
    _, nu = backward_sweep(_filter_step, model, init, (F.S, F.Dinv, F.psi, F.L, Tb))
    return nu.bodies()


def _smooth(model, F, nu):
    """Anticausal sweep thdd = (1 - H Psi L)^T nu; also returns lambda (nb, 6) (= psi^T H^T nu)."""
    lam, thdd = forward_sweep(_smooth_step, model, jnp.zeros(6, F.P.dtype), (F.S, F.psi, F.L, nu))
    return thdd.bodies(), lam[:-1]


def _per_body_masked(model, x):
    return per_body(model, x) * dof_mask(model)


def _out(model, thdd_b):
    return scatter_dofs(model, thdd_b * dof_mask(model))


def minv_solve(model: Model, F: InnovationsFactors, T):
    """M^-1 T by the innovations inverse (4.16) in two O(n) sweeps.  T (nv,) -> (nv,)."""
    nu = _filter(model, F, _per_body_masked(model, T))
    thdd, _ = _smooth(model, F, nu)
    return _out(model, thdd)


@jax.jit
def minv_operator(model: Model, q):
    """M(q)^-1 (nv, nv) as (1 - H Psi L)^T D^-1 (1 - H Psi L), one O(n) solve per column."""
    check_state(model, q=q)
    F = factors_unchecked(model, q)
    eye = jnp.eye(model.nv, dtype=F.P.dtype)
    Mi = jax.vmap(lambda e: minv_solve(model, F, e))(eye).T
    return 0.5 * (Mi + Mi.T)


register_minv("operator")(minv_operator)      # minv(model, q, method="operator")


# -- dense operators (for tests and teaching; O(n^2) memory) ----------------------------------

@jax.jit
def innovations_operators(model: Model, q):
    """Dense (1 + H Phi L), D and (1 - H Psi L), each (nv, nv).

    Column j of (1 + H Phi L) is the causal propagation of the unit innovation through
    phi (4.13); column j of (1 - H Psi L) is the whitening filter (4.15) applied to e_j.
    """
    check_state(model, q=q)
    F = factors_unchecked(model, q)
    nv, dt = model.nv, F.P.dtype
    eye = jnp.eye(nv, dtype=dt)

    def Kinv_col(y):                    # eps = (1 - H Psi L) y  via (4.15)
        yb = _per_body_masked(model, y)

        def step(zhat, x, keep=None):
            S, psi, L, yk = x
            return psi @ zhat + L @ yk, yk - S.T @ zhat
        _, eps = backward_sweep(step, model, jnp.zeros((model.nb, 6), dt), (F.S, F.psi, F.L, yb))
        return _out(model, eps.bodies())

    Kinv = jax.vmap(Kinv_col)(eye).T
    return unit_upper_factor(model, F.S, F.phi, F.L), dof_blocks(model, F.D), Kinv


def unit_upper_factor(model: Model, S, phi, L):
    """Dense (1 + H Phi L) (nv, nv) from per-body H^T = S, phi and L: column j is the causal
    propagation (4.13) of the unit innovation e_j.  Saha's U is the same matrix
    (p = S, B^T = phi, B^T psi = L), so :func:`jaxdyn.saha.udut` builds it here too."""
    dt = phi.dtype

    def col(e):
        eb = _per_body_masked(model, e)

        def step(zhat, x, keep=None):
            Sk, phik, Lk, ek = x
            return phik @ zhat + Lk @ ek, Sk.T @ zhat + ek
        _, y = backward_sweep(step, model, jnp.zeros((model.nb, 6), dt), (S, phi, L, eb))
        return _out(model, y.bodies())

    return jax.vmap(col)(jnp.eye(model.nv, dtype=dt)).T


# -- forward dynamics FD1 .. FD4 -----------------------------------------------------------------

def _bias_terms(model, F, qd, f_ext, gravity, f_ext_frame="local"):
    """Velocity terms a(k) (with the gravity pseudo-acceleration on root bodies, (3.21)) and
    b(k) - f_ext(k), per body."""
    a, b = bias_terms(model, F.joints, qd, f_ext, f_ext_frame)
    a0 = gravity_acceleration(model, gravity)
    root = (model.parent < 0)[:, None]
    ag = jax.vmap(lambda X: X @ a0)(F.X6)
    return a + jnp.where(root, ag, 0.0), b


def _zeta_step(z_p, x, keep=None):
    """zeta(k) = phi^T(k+1, k) zeta(k+1) + a(k)."""
    X6, ak = x
    z = X6 @ z_p + ak
    return z, None


def _zeta(model, F, a):
    """zeta = phi^T a (5.8): the bias accelerations propagated root to leaves, (nb, 6)."""
    zeta, _ = forward_sweep(_zeta_step, model, jnp.zeros(6, F.P.dtype), (F.X6, a))
    return zeta[:-1]


@register_method("operator_fd1")
@partial(jax.jit, static_argnames=("f_ext_frame",))
def operator_fd1(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """FD1 (4.17)-(4.22), a 4-sweep algorithm: bias-free torques T' = T - RNEA(qdd = 0)
    (2 sweeps), then the innovations inverse (4.18) as causal filter + anticausal smoother."""
    check_state(model, q=q, qd=qd, tau=tau)
    Tp = tau - rnea_passes(model, q, qd, jnp.zeros_like(qd), f_ext, gravity, f_ext_frame)[0]
    F = factors_unchecked(model, q)
    return minv_solve(model, F, Tp)


@jax.jit
def operator_fd2(model: Model, q, qd, tau, f_ext=None, gravity=None):
    """FD2 (5.5)-(5.7) with the smoother (4.21b)-(4.23): joint accelerations and the link
    spatial accelerations alpha = lambda + zeta.

    Returns (qdd (nv,), alpha (nb, 6)): alpha is each body's spatial acceleration in its own
    frame, rows [linear; angular] (Pinocchio's data.a order), *without* the gravity
    pseudo-acceleration (zeta is propagated from a = velocity terms only), so the tip
    acceleration alpha(0) of any frame is a frame transform of one row.
    """
    check_state(model, q=q, qd=qd, tau=tau)
    Tp = tau - rnea_passes(model, q, qd, jnp.zeros_like(qd), f_ext, gravity)[0]
    F = factors_unchecked(model, q)
    nu = _filter(model, F, _per_body_masked(model, Tp))
    thdd, lam = _smooth(model, F, nu)
    a, _ = _bias_terms(model, F, qd, f_ext, jnp.zeros(3, F.P.dtype))
    alpha = lam + _zeta(model, F, a)
    return _out(model, thdd), jnp.concatenate([alpha[:, 3:], alpha[:, :3]], 1)


@register_method("operator_fd2")
def _fd2(model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    Tp = tau - rnea_passes(model, q, qd, jnp.zeros_like(qd), f_ext, gravity, f_ext_frame)[0]
    F = factors_unchecked(model, q)
    thdd, _ = _smooth(model, F, _filter(model, F, _per_body_masked(model, Tp)))
    return _out(model, thdd)


@register_method("operator_fd3")
@partial(jax.jit, static_argnames=("f_ext_frame",))
def operator_fd3(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """FD3 (5.8)-(5.10), a 3-sweep algorithm:
    zeta = phi^T a (anticausal); eps = T - H psi [S L T + M zeta + b + B f(0)] (causal);
    thdd = (1 - H Psi L)^T D^-1 eps (anticausal)."""
    check_state(model, q=q, qd=qd, tau=tau)
    F = factors_unchecked(model, q)
    a, b = _bias_terms(model, F, qd, f_ext, gravity, f_ext_frame)
    Mzeta = jnp.einsum("kij,kj->ki", body_inertia_matrices(model), _zeta(model, F, a))
    Tb = _per_body_masked(model, tau)
    # the causal sweep of (5.9) is the filter (4.20) with M zeta + b injected at every link
    nu = _filter(model, F, Tb, Mzeta + b)
    thdd, _ = _smooth(model, F, nu)
    return _out(model, thdd)


def _fd4_causal_step(z, x, keep=None):
    """(5.16): eps_k = T_k - H z_k; parent gets psi (z_k + P a_k) + L T_k."""
    S, Dinv, psi, L, P, T, ak = x
    eps = T - S.T @ z
    return psi @ (z + P @ ak) + L @ T, Dinv @ eps


def _fd4_anticausal_step(lam_p, x, keep=None):
    """(5.17): lam_k = psi^T lam_p + H^T nu + (1 - G H)^T a_k;  thdd = nu - L^T lam_p - G^T a_k."""
    S, psi, L, G, nu, ak = x
    eye = jnp.eye(6, dtype=ak.dtype)
    lam = psi.T @ lam_p + S @ nu + (eye - G @ S.T).T @ ak
    return lam, nu - L.T @ lam_p - G.T @ ak


@register_method("operator_fd4")
@partial(jax.jit, static_argnames=("f_ext_frame",))
def operator_fd4(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """FD4 (5.13)-(5.17), the 3-sweep algorithm without a separate bias-acceleration sweep:
    V (and a, b) anticausally, then the causal filter (5.16) and the anticausal (5.17)."""
    check_state(model, q=q, qd=qd, tau=tau)
    F = factors_unchecked(model, q)
    a, b = _bias_terms(model, F, qd, f_ext, gravity, f_ext_frame)
    Tb = _per_body_masked(model, tau)
    _, nu = backward_sweep(_fd4_causal_step, model, b, (F.S, F.Dinv, F.psi, F.L, F.P, Tb, a))
    _, thdd = forward_sweep(_fd4_anticausal_step, model, jnp.zeros(6, F.P.dtype),
                            (F.S, F.psi, F.L, F.G, nu.bodies(), a))
    thdd = thdd.bodies()
    return _out(model, thdd)


register_method("operator")(operator_fd1)       # Rodriguez and Kreutz's (1988) main algorithm
