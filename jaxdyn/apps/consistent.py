"""Physically consistent refinement of identified inertial parameters: the bodies'
log-Cholesky parameters theta (nb, 10) (Rucker and Wensing 2022; every real theta is a
physically consistent body) fitted by L-BFGS (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`), on the
torque residual of the regressor (:func:`identify_consistent`) or on a rollout's output error
(:func:`identify_simulation_error`).  Re-exported by :mod:`jaxdyn.apps.sysid`, whose module
docstring gives the parameter order and the regressor."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..errors import ArgumentError, ShapeError
from .lbfgs import lbfgs_minimize


@jax.jit
def parameters_from_log_cholesky(theta):
    """theta (nb, 10) log-Cholesky parameters -> pi (10 nb,) in Pinocchio's order: every real
    theta is a physically consistent set of bodies (Rucker & Wensing 2022)."""
    return jax.vmap(lambda t: sp.inertia.to_vector(sp.inertia.from_log_cholesky(t)))(theta).reshape(-1)


class ConsistentFit(NamedTuple):
    """Result of the consistent estimators: theta (nb, 10), pi (p,), loss history."""
    theta: jax.Array     # (nb, 10) log-Cholesky parameters
    pi: jax.Array        # (p,) parameters: the inertial parameters of theta (10 nb,), and with a
    #                      layout also the joint-term coefficients, in the layout's order
    history: jax.Array   # (steps,) loss per iteration


def identify_consistent(Y, tau, theta0, weights=None, prior=None, prior_weight=0.0, steps=2000, fixed=None,
                        pi_fixed=None, layout=None):
    """Nonlinear refinement on the torque residual through the log-Cholesky parametrization
    (every iterate physically consistent), with L-BFGS (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`):

    ``min mean_k || w * (Y_k x - tau_k) ||^2 / nv + prior_weight^2 ||x - prior||^2 / p``

    Y (N, nv, p), tau (N, nv) (the joint terms Y has no columns for removed), theta0 (nb, 10)
    start (e.g. ``jaxdyn.log_cholesky_parameters(nominal)``), ``fixed`` (nb,) bool: bodies not
    fitted, whose parameters are the rows of ``pi_fixed`` (10 nb,) (e.g. massless bodies, which
    have no log-Cholesky parameters: ``jaxdyn.sysid.inertial_parameters(nominal)``); their
    theta0 rows are ignored (NaN allowed).  Without ``layout``, p = 10 nb and x = pi(theta).
    With ``layout`` (:func:`jaxdyn.apps.joint_terms.layout`, p = layout.p) x also holds the joint
    terms' coefficients x_j; the loss is quadratic in them, so for every theta they take their
    optimal value ``x_j = A_jj^+ (b_j - A_ji pi(theta))`` (variable projection, Golub and Pereyra
    1973; A, b the normal equations) and L-BFGS runs on theta alone.  They are not constrained
    to be >= 0.  Returns :class:`ConsistentFit` (theta rows of fixed bodies: NaN).
    """
    Y, tau, theta0 = jnp.asarray(Y), jnp.asarray(tau), jnp.asarray(theta0)
    nb = theta0.shape[0] if theta0.ndim == 2 else -1
    p = 10 * nb if layout is None else layout.p
    if Y.ndim != 3 or tau.shape != Y.shape[:2] or theta0.shape != (nb, 10) or Y.shape[2] != p or \
            (layout is not None and layout.inertial.shape != (10 * nb,)):
        raise ShapeError(f"need Y (N, nv, p = {'10 nb' if layout is None else 'layout.p'}), tau (N, nv), "
                         f"theta0 (nb, 10); got {Y.shape}, {tau.shape}, {theta0.shape}"
                         + ("" if layout is None else f", layout.p = {layout.p}, {len(layout.inertial) // 10} bodies"))
    free = np.ones(nb, bool) if fixed is None else ~np.asarray(fixed, bool)
    if free.shape != (nb,):
        raise ShapeError(f"fixed must be (nb,) = ({nb},), got {free.shape}")
    if not free.all() and pi_fixed is None:
        raise ArgumentError("fixed bodies need pi_fixed (10 nb,): their parameters")
    pf = jnp.zeros(10 * nb, theta0.dtype) if pi_fixed is None else jnp.asarray(pi_fixed, theta0.dtype)
    if pf.shape != (10 * nb,):
        raise ShapeError(f"pi_fixed must be (10 nb,) = ({10 * nb},), got {pf.shape}")
    bad = ~np.all(np.isfinite(np.asarray(theta0)), axis=1) & free
    if bad.any():
        raise ArgumentError(f"theta0 rows {np.flatnonzero(bad).tolist()} are not finite (bodies without a "
                            "positive-definite pseudo-inertia, e.g. massless): mark them fixed and give pi_fixed")
    w = jnp.ones(Y.shape[1], Y.dtype) if weights is None else jnp.asarray(weights)
    prior = None if prior is None else jnp.asarray(prior, Y.dtype)
    ii = np.arange(10 * nb) if layout is None else layout.inertial
    jj = np.zeros(0, int) if layout is None else layout.joint

    @jax.jit
    def run(theta0, Y, tau, w, pf, prior):         # one program: the setup and the L-BFGS loop
        theta0 = jnp.where(free[:, None], theta0, 0.0)
        # the loss |W x - t|^2 / n (+ the prior's rows) in square-root form |R x - z|^2 + e, with
        # W = Q R (Q^T Q = I), z = Q^T t and e = |t|^2 - |z|^2 (the residual no x explains): its
        # rounding scales with the loss itself, not with |t|^2 (the expanded x A x - 2 b x + c
        # loses the last digits of a small loss to cancellation)
        n = Y.shape[0] * Y.shape[1]
        W = (Y * w[None, :, None]).reshape(n, p) / np.sqrt(n)
        t = (tau * w[None, :]).reshape(n) / np.sqrt(n)
        if prior is not None:
            r = prior_weight / np.sqrt(p)
            W = jnp.concatenate([W, r * jnp.eye(p, dtype=W.dtype)])
            t = jnp.concatenate([t, r * prior])
        Qw, R = jnp.linalg.qr(W)
        z = Qw.T @ t
        e = jnp.maximum(t @ t - z @ z, 0.0)                     # >= 0 (rounding aside)
        A, b = R.T @ R, R.T @ z                                  # the normal equations (variable projection)
        free10 = jnp.repeat(free, 10)
        Ajj_pinv = jnp.linalg.pinv(A[jj][:, jj]) if len(jj) else jnp.zeros((0, 0), A.dtype)

        def params(th):
            pi = jnp.where(free10, parameters_from_log_cholesky(jnp.where(free[:, None], th, theta0)), pf)
            xj = Ajj_pinv @ (b[jj] - A[jj][:, ii] @ pi)          # optimal joint terms for this pi
            return jnp.zeros(p, pi.dtype).at[ii].set(pi).at[jj].set(xj)

        def loss(th):
            res = R @ params(th) - z
            return res @ res + e

        th, hist = lbfgs_minimize(loss, theta0, steps)
        return jnp.where(free[:, None], th, jnp.nan), params(th), hist

    return ConsistentFit(*run(theta0, Y, tau, w, pf, prior))


def simulation_error(model, theta, q0, qd0, U, dt, Q_meas, stepper="rk4", free=None):
    """Simulation-error loss mean |q_k(theta) - Q_meas[k]|^2 of a rollout of the model with
    the bodies' log-Cholesky parameters theta (nb, 10) under held torques U (steps, nv), from
    (q0, qd0); Q_meas (steps + 1, nq).  Differentiable in theta (reverse mode through the
    rollout): the output-error estimator's objective."""
    from ..integrators.rollout import rollout
    from ..model.parameters import with_log_cholesky_parameters
    if free is not None:
        theta = jnp.where(jnp.asarray(free)[:, None], theta, jax.lax.stop_gradient(theta))
    m = with_log_cholesky_parameters(model, theta)
    tr = rollout(m, q0, qd0, U, dt, U.shape[0], stepper=stepper)
    return jnp.mean((tr.q - Q_meas) ** 2)


def identify_simulation_error(model, theta0, q0, qd0, U, dt, Q_meas, steps=100, stepper="rk4", free=None):
    """Output-error refinement: L-BFGS (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`) on
    :func:`simulation_error` from theta0 (nb, 10), gradients by reverse mode through the
    rollout.  ``free`` (nb,) bool: bodies to fit (the others stay at theta0).  Returns
    :class:`ConsistentFit` (pi of the final theta)."""
    theta0 = jnp.asarray(theta0)
    fr = jnp.ones(theta0.shape[0], bool) if free is None else jnp.asarray(free, bool)

    def loss(th):
        return simulation_error(model, jnp.where(fr[:, None], th, theta0), q0, qd0, U, dt, Q_meas, stepper)

    @jax.jit
    def run(th):
        th, hist = lbfgs_minimize(loss, th, steps)
        th = jnp.where(fr[:, None], th, theta0)
        return th, parameters_from_log_cholesky(th), hist

    return ConsistentFit(*run(theta0))
