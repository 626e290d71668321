"""System identification of link inertias: the inertial-parameter regressor, base parameters
and linear least squares.

Parameters: 10 per body in Pinocchio's dynamic-parameter order
``pi_i = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` with the rotational
inertia about the *body frame origin* (body-frame axes); ``pi`` stacks the bodies, (10 nb,).

RNEA is linear in pi: ``rnea(model, q, qd, qdd) = Y(q, qd, qdd) pi + armature * qdd`` with the
regressor Y (nv, 10 nb) (Pinocchio's ``computeJointTorqueRegressor``).  Only some linear
combinations of pi affect the torques (the base parameters, Gautier and Khalil 1990); they are
found from a stacked regressor by QR with column pivoting (:func:`base_parameters`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..dynamics.common import body_inertias, scatter_dofs
from ..dynamics.rnea import rnea_core
from ..errors import ArgumentError, ShapeError
from ..model.model import check_state


def inertial_parameters(model):
    """pi (10 nb,): the model's inertial parameters (see the module docstring)."""
    return jax.vmap(sp.inertia.to_vector)(body_inertias(model)).reshape(-1)


def with_inertial_parameters(model, pi):
    """The model with mass, com and inertia (about the COM) set from pi (10 nb,).  A body with
    zero mass gets com = 0 and its rotational inertia about the origin."""
    pi = jnp.asarray(pi)
    if pi.shape != (10 * model.nb,):
        raise ShapeError(f"pi must have shape (10 nb,) = ({10 * model.nb},) for model {model.name!r}, got {pi.shape}")
    m, c, Ic = jax.vmap(lambda p: sp.inertia.to_mcI(sp.inertia.from_vector(p)))(pi.reshape(model.nb, 10))
    return model.replace(mass=m, com=c, inertia=Ic)


@jax.jit
def regressor(model, q, qd, qdd):
    """Y (nv, 10 nb) with rnea(model, q, qd, qdd) = Y @ inertial_parameters(model) + armature * qdd.

    Exact (RNEA is linear in the spatial inertias; Y is its Jacobian, by reverse mode).
    Gravity is the model's.  Batch over a trajectory with ``jax.vmap``.
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    dt = jnp.result_type(qd)

    def tau(pi):
        I = jax.vmap(sp.inertia.from_vector)(pi.reshape(model.nb, 10))
        return scatter_dofs(model, rnea_core(model, q, qd, qdd, inertias=I)[0])

    return jax.jacrev(tau)(jnp.zeros(10 * model.nb, dt))


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

    Y (N, nv, p) regressors, tau (N, nv) measured torques (armature terms removed), ``weights``
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
