"""System identification of link inertias: the inertial-parameter regressor, base parameters
and linear least squares.

Parameters: 10 per body in Pinocchio's dynamic-parameter order
``pi_i = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` with the rotational
inertia about the *body frame origin* (body-frame axes); ``pi`` stacks the bodies, (10 nb,).

RNEA is linear in pi: ``rnea(model, q, qd, qdd) = Y(q, qd, qdd) pi + armature * qdd`` with the
regressor Y (nv, 10 nb) (Pinocchio's ``computeJointTorqueRegressor``).  Only some linear
combinations of pi affect the torques (the base parameters, Gautier and Khalil 1990); they are
found from a stacked regressor by QR with column pivoting (:func:`base_parameters`).

With joint ``terms`` (armature, viscous and Coulomb friction, :mod:`jaxdyn.apps.joint_terms`)
the regressor gains their columns and the parameter vector x (p,) their coefficients, after
each body's 10 inertial parameters: ``Y(q, qd, qdd) x`` is then the motor torque
``rnea + armature qdd + damping qd + friction sign(qd)`` restricted to the chosen terms.
"""
from __future__ import annotations

from functools import partial

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..dynamics.rnea import rnea_passes
from ..errors import ArgumentError, ShapeError
from ..model.model import check_state
from ..model.parameters import body_inertias
from . import joint_terms as jt
from .excitation import (Fourier as Fourier, fourier_eval as fourier_eval, fourier_excitation as fourier_excitation,
                         sample_fourier as sample_fourier)
from .common import optax_promotion
from .consistent import (ConsistentFit as ConsistentFit, identify_consistent as identify_consistent,
                         identify_simulation_error as identify_simulation_error,
                         parameters_from_log_cholesky as parameters_from_log_cholesky,
                         simulation_error as simulation_error)


@jax.jit
def inertial_parameters(model):
    """pi (10 nb,): the model's inertial parameters (see the module docstring)."""
    return jax.vmap(sp.inertia.to_vector)(body_inertias(model)).reshape(-1)


@jax.jit
def _mass_com_inertia(P):
    """(m (n,), c (n, 3), Ic (n, 3, 3) about the COM) of parameter rows P (n, 10), as one program."""
    return jax.vmap(lambda p: sp.inertia.to_mcI(sp.inertia.from_vector(p)))(P)


def with_inertial_parameters(model, pi):
    """The model with mass, com and inertia (about the COM) set from pi (10 nb,).  A body with
    zero mass gets com = 0 and its rotational inertia about the origin."""
    pi = jnp.asarray(pi)
    if pi.shape != (10 * model.nb,):
        raise ShapeError(f"pi must have shape (10 nb,) = ({10 * model.nb},) for model {model.name!r}, got {pi.shape}")
    m, c, Ic = _mass_com_inertia(pi.reshape(model.nb, 10))
    return model.replace(mass=m, com=c, inertia=Ic)


def parameters(model, terms=()):
    """x (p,): the inertial parameters and the joint ``terms``' coefficients of the model in
    the order of :func:`jaxdyn.apps.joint_terms.layout` (terms = (): x == pi)."""
    return _parameters(model, jt.check_terms(terms))


@partial(jax.jit, static_argnames="terms")
def _parameters(model, terms):
    lay = jt.layout(model, terms)
    x = jnp.zeros(lay.p, model.mass.dtype).at[lay.inertial].set(inertial_parameters(model))
    return x.at[lay.joint].set(jt.joint_parameters(model, lay.terms))


def with_parameters(model, x, terms=()):
    """The model with the inertias and joint-term coefficients of x (p,) (see :func:`parameters`)."""
    lay = jt.layout(model, terms)
    x = jnp.asarray(x)
    if x.shape != (lay.p,):
        raise ShapeError(f"x must have shape (10 nb + {len(lay.terms)} nv,) = ({lay.p},) for model {model.name!r} "
                         f"and terms {lay.terms}, got {x.shape}")
    return _with_parameters(model, x, lay.terms)


@partial(jax.jit, static_argnames="terms")
def _with_parameters(model, x, terms):
    """:func:`with_parameters` (x checked) as one program."""
    lay = jt.layout(model, terms)
    return jt.with_joint_parameters(with_inertial_parameters(model, x[lay.inertial]), x[lay.joint], lay.terms)


def regressor(model, q, qd, qdd, terms=()):
    """Y (nv, p) with ``Y @ parameters(model, terms)`` = rnea(model, q, qd, qdd) - armature qdd
    + the joint ``terms`` (see the module docstring); terms = (): p = 10 nb and Y is
    Pinocchio's ``computeJointTorqueRegressor``.

    Exact (RNEA is linear in the spatial inertias; Y is its Jacobian, by reverse mode; the
    joint columns are qdd_j, qd_j, sign(qd_j)).  Gravity is the model's.  Batch over a
    trajectory with :func:`regressors`.
    """
    return _regressor(model, q, qd, qdd, jt.check_terms(terms))


@partial(jax.jit, static_argnames="terms")
def _regressor(model, q, qd, qdd, terms):
    check_state(model, q=q, qd=qd, qdd=qdd)
    dt = jnp.result_type(qd)

    def tau(pi):
        inertias = jax.vmap(sp.inertia.from_vector)(pi.reshape(model.nb, 10))
        return rnea_passes(model, q, qd, qdd, inertias=inertias)[0] - model.armature * qdd

    Yi = jax.jacrev(tau)(jnp.zeros(10 * model.nb, dt))
    if not terms:
        return Yi
    lay = jt.layout(model, terms)
    Y = jnp.zeros((model.nv, lay.p), dt).at[:, lay.inertial].set(Yi)
    return Y.at[:, lay.joint].set(jt.joint_regressor(qd, qdd, lay.terms))


class BaseParameters(NamedTuple):
    """Base parameters of a stacked regressor W (rows, p): ``W @ pi == W[:, independent] @ pi_base``
    with ``pi_base = pi[independent] + beta @ pi[dependent]``."""
    rank: int
    independent: np.ndarray   # (rank,) parameter indices kept
    dependent: np.ndarray     # (p - rank,) parameter indices folded into the kept ones
    beta: np.ndarray          # (rank, p - rank)

    def reduce(self, pi):
        """pi (p,) -> pi_base (rank,)."""
        pi = np.asarray(pi)
        return pi[self.independent] + self.beta @ pi[self.dependent]

    def columns(self, Y):
        """Regressor (..., p) -> base regressor (..., rank)."""
        return np.asarray(Y)[..., self.independent]

    def project(self, pi):
        """pi (p,) -> the full-length parameters (p,) that hold the base parameters at the
        independent indices and 0 at the dependent ones: ``W @ project(pi) == W @ pi`` for
        every regressor row of the model, and ``project(project(pi)) == project(pi)``
        (the canonical representative of pi's class of dynamically equivalent parameters)."""
        out = np.zeros(np.shape(pi), float)
        out[self.independent] = self.reduce(pi)
        return out

    def alone(self, pi_base, tol=1e-9):
        """(p,): the parameters that the base parameters pi_base (rank,) determine on their own
        (an independent column with nothing folded into it, |beta row| <= tol, e.g. a joint's
        friction coefficient), NaN for the others."""
        out = np.full(len(self.independent) + len(self.dependent), np.nan)
        own = np.all(np.abs(self.beta) <= tol, axis=1) if self.beta.size else np.ones(self.rank, bool)
        out[self.independent[own]] = np.asarray(pi_base)[own]
        return out


def base_parameters(W, rtol=1e-10):
    """Base parameters from a stacked regressor W (rows, p) by QR with column pivoting.

    Numerical rank: |R_jj| > rtol * |R_00|.  W should come from exciting states (many random
    states, or an excitation trajectory); parameters W does not see (e.g. a massless root body
    fixed to the world) are dependent with beta = 0.
    """
    import scipy.linalg
    W = np.asarray(W, float)
    if W.ndim != 2:
        raise ShapeError(f"W must be a stacked regressor (rows, p), got shape {W.shape}")
    _, R, piv = scipy.linalg.qr(W, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > rtol * max(d[0], np.finfo(float).tiny))) if d.size else 0
    beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:]) if r else np.zeros((0, W.shape[1]))
    return BaseParameters(r, piv[:r], piv[r:], beta)


def identify_least_squares(Y, tau, base: BaseParameters, weights=None, prior=None, prior_weight=0.0):
    """Linear least squares on the torque residual: pi_base minimizing
    ``|| w * (Y_base pi_base - tau) ||^2 + prior_weight^2 || pi_base - prior ||^2``.

    Y (N, nv, p) regressors, tau (N, nv) measured torques (the joint terms Y has no columns for
    removed, e.g. ``tau - joint_terms.joint_torque(model, qd, qdd, known)``), ``weights``
    (nv,) per-joint weights (e.g. 1 / noise std), ``prior`` (rank,) nominal base parameters.
    Returns pi_base (rank,).
    """
    Y, tau = np.asarray(Y, float), np.asarray(tau, float)
    if Y.ndim != 3 or tau.shape != Y.shape[:2]:
        raise ShapeError(f"Y must be (N, nv, p) and tau (N, nv), got {Y.shape} and {tau.shape}")
    w = np.ones(Y.shape[1]) if weights is None else np.asarray(weights, float)
    A = (base.columns(Y) * w[None, :, None]).reshape(-1, base.rank)
    b = (tau * w[None, :]).reshape(-1)
    if prior is not None and prior_weight > 0:
        A = np.vstack([A, prior_weight * np.eye(base.rank)])
        b = np.concatenate([b, prior_weight * np.asarray(prior, float)])
    elif prior is not None:
        raise ArgumentError("prior given with prior_weight = 0")
    return np.linalg.lstsq(A, b, rcond=None)[0]


def consistency_report(model, pi):
    """Per body: (mass, smallest principal moment about the COM, triangle margin
    min(I1 + I2 - I3) over permutations).  A physical body has all three > 0 (>= 0 for the
    moments of a flat body).  Returns a NumPy array (nb, 3)."""
    m, _, Ic = _mass_com_inertia(np.asarray(pi).reshape(model.nb, 10))
    lam = np.linalg.eigvalsh(0.5 * (np.asarray(Ic) + np.swapaxes(np.asarray(Ic), -1, -2)))
    tri = lam[:, 0] + lam[:, 1] - lam[:, 2]
    return np.stack([np.asarray(m), lam[:, 0], tri], 1)


# ---- excitation design ----------------------------------------------------------------------

def regressors(model, Q, QD, QDD, terms=()):
    """Y (N, nv, p): :func:`regressor` at N samples Q, QD, QDD (N, nv) (one compiled program
    per model structure and terms)."""
    return _regressors(model, Q, QD, QDD, jt.check_terms(terms))


@partial(jax.jit, static_argnames="terms")
def _regressors(model, Q, QD, QDD, terms):
    return jax.vmap(lambda q, v, a: _regressor(model, q, v, a, terms))(Q, QD, QDD)


def stacked_regressor(model, Q, QD, QDD, terms=()):
    """W (N nv, p): the regressors of N samples stacked."""
    Y = regressors(model, Q, QD, QDD, terms)
    return Y.reshape(-1, Y.shape[-1])


def condition_number(W, base: BaseParameters):
    """Condition number of the base-parameter columns of a stacked regressor (N nv, p), after
    scaling each column to unit norm (so units do not count)."""
    return _condition_number(W, base.independent)


@jax.jit
def _condition_number(W, independent):
    Wb = W[:, independent]
    Wb = Wb / jnp.linalg.norm(Wb, axis=0, keepdims=True)
    s = jnp.linalg.svd(Wb, compute_uv=False)
    return s[0] / s[-1]


def optimize_excitation(model, f: Fourier, t, base: BaseParameters, steps=50, learning_rate=0.02, terms=()):
    """Lower the condition number of the base regressor (with the joint ``terms``) over the
    samples t by Adam on the Fourier coefficients (log cond; amplitudes re-bounded to the
    start's per-joint range after every step).  Returns (Fourier, cond history (steps + 1,))."""
    terms = jt.check_terms(terms)
    import optax
    opt = optax.adam(learning_rate)

    @jax.jit
    def run(ab):
        wl = (f.w_f * jnp.arange(1, f.a.shape[1] + 1, dtype=f.a.dtype))[None, :]
        bound = lambda a, b: jnp.sum((jnp.abs(a) + jnp.abs(b)) / wl, 1)
        half0 = bound(*ab)

        def rescale(ab):
            a, b = ab
            s = jnp.minimum(1.0, half0 / bound(a, b))[:, None]
            return a * s, b * s

        def logcond(ab):
            a, b = rescale(ab)
            Q, QD, QDD = sample_fourier(f._replace(a=a, b=b), t)
            return jnp.log(condition_number(stacked_regressor(model, Q, QD, QDD, terms), base))

        def step(carry, _):
            ab, s = carry
            v, g = jax.value_and_grad(logcond)(ab)
            with optax_promotion():
                upd, s = opt.update(g, s, ab)
                ab = optax.apply_updates(ab, upd)
            return (rescale(ab), s), v
        with optax_promotion():
            s0 = opt.init(ab)
        (ab, _), hist = jax.lax.scan(step, (ab, s0), None, length=steps)
        return ab, jnp.exp(jnp.concatenate([hist, logcond(ab)[None]]))

    (a, b), hist = run((f.a, f.b))
    return f._replace(a=a, b=b), hist
