"""Constrained forward dynamics of closed models (loop closures, contacts held rigid).

Equations (rows in world-aligned axes, Pinocchio's LOCAL_WORLD_ALIGNED, [linear; angular]):

    M qdd + h = tau + K^T lam,        K qdd + k = -(2 alpha K qd + beta^2 r)

with r(q) the residual (point: p_a - p_b, the world positions of the two contact-frame
origins; weld: [p_a - p_b; log3(R_a R_b^T)]; revolute and subspace: phi^T R_a^T times the weld
residual, in frame A's axes), K = d r / dq in the tangent space (:func:`constraint_jacobian`;
the angular rows of a weld are omega_a - omega_b), and
k = K-dot qd, the classical acceleration of the constraint at qdd = 0 (exact: from the frames'
spatial accelerations plus omega x v, no finite differences).  Linear rows are exact second
derivatives of r; angular weld rows are exact derivatives of the relative angular velocity.

Baumgarte stabilization ``stabilization=(alpha, beta)`` adds the feedback above (critically
damped for alpha = beta; e.g. (10, 10) for dt = 1e-3..1e-2 s); None imposes K qdd + k = 0.

Solvers (``method=``):

* ``"kkt"``: the dense KKT system of Yamane and Nakamura (2001, Eq. 7),
  [[M, K^T], [K, 0]] [qdd; -lam] = [tau - h; rhs] (the reference);
* ``"schur"`` (default): lam from (K M^-1 K^T) lam = rhs - K qdd_free, then
  qdd = qdd_free + M^-1 K^T lam, all on one ABA factorization of M
  (:mod:`jaxdyn.constraints.schur`, with its implicit derivative rule).  K M^-1 K^T comes
  from the contact frames' operational-space inverse inertia by Rodriguez and Kreutz's O(N)
  recursion (6.10), so M^-1 is never formed: one RNEA, one factorization, two O(n) solves
  and one O(n m) recursion.

Redundant constraints (rank-deficient K, e.g. a planar four-bar closed by a 3-row point
constraint) make both systems singular; qdd is still unique.  Both solvers use a proximal
(regularized) iteration: lam_{j+1} solves the system with K qdd - E (lam - lam_j) = rhs,
E = 1e-10 diag(K M^-1 K^T) (float32: 2.4e-5; :func:`~jaxdyn.constraints.solve.prox_eps`), a
fixed number (``PROX_ITERS``) of times.  It converges to the exact qdd and the least-norm
multipliers, never divides by zero, and has no while loop, so it is reverse-differentiable.
``res.rank`` and ``res.cond`` report the numerical rank and the condition number on its range
of K M^-1 K^T (Jacobi-scaled: rows of different units weigh alike), ``res.singular`` whether the rank is short
of its ``res.rows`` (the forces are then not unique; the accelerations are).  RCCFD and
Lilly-Orin solve their own constraint-space systems by the same proximal iteration and report
them alike (:mod:`jaxdyn.constraints.grasp`), and also each chain's constrained operator
(``res.chain_deficit``, part of ``res.singular``).
"""
from __future__ import annotations

from functools import partial

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..batching import crba, rnea
from ..dynamics.forward import tree_dof_masks, tree_solve
from ..errors import ArgumentError, ModelError
from ..model.configuration import integrate
from ..model.model import cast, check_state, state_dtype
from .grasp import GraspSystem
from .grasp_solvers import lilly_orin_solve, rccfd_solve
from .legged import LeggedSystem, legged_forward_dynamics
from .model import ClosedModel
from .rows import (constraint_bias as constraint_bias, constraint_jacobian as constraint_jacobian,
                   constraint_residual as constraint_residual, contact_frames, delassus as delassus, jacobian_of,
                   rows_target)
from .schur import schur_solve
from .solve import PROX_ITERS, RANK_TOL, diagnostics, prox_eps, prox_solve


class ConstrainedResult(NamedTuple):
    """Result of :func:`constrained_forward_dynamics` (fields below; m constraint rows)."""
    qdd: jax.Array       # (nv,) joint accelerations
    lam: jax.Array       # (m,) constraint forces: M qdd + h = tau + K^T lam
    residual: jax.Array  # (m,) K qdd + k + stabilization (0 up to round-off when consistent)
    rank: jax.Array      # () numerical rank of the solved constraint-space system: K M^-1 K^T
                         #    (schur, kkt), Omega on the constrained rows (rccfd, lilly_orin)
    cond: jax.Array      # () its condition number on its range
    rows: jax.Array      # () its size: m (schur, kkt), the grasps' / hips' constrained rows
    chain_deficit: jax.Array = 0   # () rccfd, lilly_orin: the summed rank deficiency of the chains'
    #                                constrained operators A_k = phi^c^T Lambda_k^-1 phi^c (0: schur, kkt)

    @property
    def singular(self) -> jax.Array:
        """rank < rows (dependent constraints or a singular mechanism) or, for the structured
        methods, a singular chain (chain_deficit > 0; their elimination runs through each
        chain's operator, whose rounding is then amplified, notably in float32).  qdd is
        still the exact one up to that rounding (every method's proximal solve); lam is the
        least-norm one of many."""
        return (self.rank < self.rows) | (self.chain_deficit > 0)


def check_stabilization(stabilization):
    """``stabilization`` as a tuple (alpha, beta) of floats, or None.  Raises ArgumentError
    unless it is None or two finite numbers >= 0 (Baumgarte gains)."""
    if stabilization is None:
        return None
    try:
        gains = tuple(float(x) for x in stabilization)
    except (TypeError, ValueError):
        gains = ()
    if len(gains) != 2 or not all(np.isfinite(g) and g >= 0 for g in gains):
        raise ArgumentError(f"stabilization must be None or (alpha, beta): two finite Baumgarte gains >= 0, "
                            f"got {stabilization!r}")
    return gains


def _chain_deficit(chains, after):
    """Summed rank deficiency of the chain operators (ell, 6, 6) (:func:`solve.diagnostics`
    each, after ``after``: the previous diagnostic's result, so that the eigendecompositions run
    one after the other), at the threshold sqrt(eps) (1.5e-8 in float64, 3.5e-4 in float32;
    at least :data:`solve.RANK_TOL`): the structured methods eliminate through each chain, so
    rounding reaches their accelerations amplified by cond(A_k); a chain whose scaled condition
    number exceeds 1 / sqrt(eps) (half the working digits lost) is reported singular."""
    tol = max(RANK_TOL, float(np.sqrt(jnp.finfo(chains.dtype).eps)))
    ranks = jax.vmap(lambda Ak: diagnostics(Ak, jnp.atleast_1d(after), tol)[0])(chains)
    return jnp.sum(chains.shape[-1] - ranks)


def constrained_forward_dynamics(cm: ClosedModel | GraspSystem | LeggedSystem, q, qd, tau, method="schur",
                                 stabilization=None):
    """Joint accelerations and constraint forces of a closed model.

    Args: cm a :class:`ClosedModel` (``method`` "schur" | "kkt") or a
    :class:`~jaxdyn.constraints.grasp.GraspSystem` (``method="rccfd"``, Rodriguez and Kreutz's
    RCCFD 1 with the non-rigid grasps of their Appendix B, or ``"lilly_orin"``, Lilly and
    Orin's Type 0) or a :class:`~jaxdyn.constraints.legged.LeggedSystem` (``"lilly_orin"``,
    Lilly and Orin's Type 1, or ``"rccfd"``, in the tree's coordinates; "schur" / "kkt" solve
    its closed form); q (nq,), qd (nv,), tau (nv,) (joint damping of the model applies, as in
    :func:`jaxdyn.forward_dynamics`); ``stabilization`` None or (alpha, beta) Baumgarte gains.
    Returns: :class:`ConstrainedResult` (qdd, lam, residual, rank, cond, rows).
    """
    return _constrained_forward_dynamics(cm, q, qd, tau, method=method,
                                         stabilization=check_stabilization(stabilization))


@partial(jax.jit, static_argnames=("method", "stabilization"))
def _constrained_forward_dynamics(cm, q, qd, tau, method, stabilization):
    if isinstance(cm, LeggedSystem):
        if method in ("schur", "kkt"):
            return _constrained_forward_dynamics(cm.closed, q, qd, tau, method, stabilization)
        if method not in ("rccfd", "lilly_orin"):
            raise ArgumentError(f"unknown constrained method {method!r} for a LeggedSystem; use 'lilly_orin' "
                                "(Lilly and Orin's Type 1), 'rccfd', or 'schur' / 'kkt' (its closed form)")
        check_state(cm.model, q=q, qd=qd, tau=tau)
        qdd, lam, A, chains = legged_forward_dynamics(cm, q, qd, tau, method, stabilization)
        get = contact_frames(cm.closed, q, qd)                # the feet's rows, to report the residual
        K = jacobian_of(cm.closed, get)
        rank, cond = diagnostics(A, qdd)
        return ConstrainedResult(qdd, lam, K @ qdd - rows_target(cm.closed, get, qd, K, stabilization), rank, cond,
                                 jnp.asarray(A.shape[0]), _chain_deficit(chains, cond))
    if isinstance(cm, GraspSystem):
        if method not in ("rccfd", "lilly_orin"):
            raise ArgumentError(f"a GraspSystem is solved by method='rccfd' or 'lilly_orin', got {method!r} (for "
                                "schur / kkt build the equivalent ClosedModel with jaxdyn.close_loops)")
        if jnp.shape(q) != (cm.nq,) or jnp.shape(qd) != (cm.nv,) or jnp.shape(tau) != (cm.nv,):
            raise ArgumentError(f"GraspSystem state: q ({cm.nq},), qd and tau ({cm.nv},) (object first, then "
                                f"the arms), got {jnp.shape(q)}, {jnp.shape(qd)}, {jnp.shape(tau)}")
        sol = (rccfd_solve if method == "rccfd" else lilly_orin_solve)(cm, q, qd, tau, stabilization)
        rank, cond = diagnostics(sol.system, sol.qdd)
        return ConstrainedResult(sol.qdd, sol.lam.reshape(-1), sol.residual, rank, cond,
                                 jnp.asarray(sol.system.shape[0]), _chain_deficit(sol.chains, cond))
    if not isinstance(cm, ClosedModel):
        raise ArgumentError(f"constrained_forward_dynamics needs a ClosedModel (jaxdyn.close_loops) or a "
                            f"GraspSystem (jaxdyn.grasp_system), got {type(cm).__name__}")
    if method in ("rccfd", "lilly_orin"):
        raise ArgumentError(f"method={method!r} needs the structure of arms of one kind holding one object: build "
                            "a GraspSystem with jaxdyn.grasp_system (this ClosedModel is a general loop closure)")
    if method not in ("schur", "kkt"):
        raise ArgumentError(f"unknown constrained method {method!r}; use 'schur' or 'kkt' (a GraspSystem: "
                            "'rccfd' or 'lilly_orin')")
    model = cm.model
    check_state(model, q=q, qd=qd, tau=tau)
    dt = state_dtype(q, qd, tau)
    cm = cm.replace(model=cast(model, dt))
    q, qd, tau = q.astype(dt), qd.astype(dt), tau.astype(dt)
    if method == "schur":
        qdd, lam, residual, A = schur_solve(stabilization, cm, q, qd, tau)
    else:
        model = cm.model
        get = contact_frames(cm, q, qd)
        K = jacobian_of(cm, get)
        rhs = rows_target(cm, get, qd, K, stabilization)
        M = crba(model, q)
        A = K @ tree_solve(M, K.T, tree_dof_masks(model))      # K M^-1 K^T from the same M
        eps = prox_eps(jnp.diagonal(A))
        h = rnea(model, q, qd, jnp.zeros_like(qd)) + model.damping * qd
        nv, mm = model.nv, K.shape[0]
        Z = jnp.block([[M, K.T], [K, -jnp.diag(eps)]])
        lam_prev = jnp.zeros(mm, M.dtype)
        for _ in range(PROX_ITERS):
            x = jnp.linalg.solve(Z, jnp.concatenate([tau - h, rhs + eps * lam_prev]))
            lam_prev = -x[nv:]
        qdd, lam = x[:nv], lam_prev
        residual = K @ qdd - rhs
    rank, cond = diagnostics(A, qdd)
    return ConstrainedResult(qdd, lam, residual, rank, cond, jnp.asarray(A.shape[0]), jnp.zeros((), rank.dtype))


def project_constraints(cm: ClosedModel, q, qd, iters=20):
    """Consistent initial conditions: (q, qd) moved onto r(q) = 0 and K qd = 0.

    q: ``iters`` Gauss-Newton steps q <- q (+) (-K^+ r) (least-norm steps, a fixed count: no
    while loop); qd: its least-norm correction qd - K^+ K qd.  Returns (q, qd).  Where the
    mechanism cannot close (links too short, a pose out of reach) the steps end at a least-
    squares point with r(q) != 0; this function stays traceable and does not check:
    :func:`check_assembled` does, on concrete values.
    """
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ArgumentError(f"project_constraints: iters must be an int >= 0, got {iters!r}")
    if not isinstance(cm, ClosedModel):
        raise ArgumentError(f"project_constraints needs a ClosedModel (jaxdyn.close_loops), got {type(cm).__name__}")
    return _project_constraints(cm, q, qd, int(iters))


@partial(jax.jit, static_argnames=("iters",))
def _project_constraints(cm, q, qd, iters):
    model = cm.model
    check_state(model, q=q, qd=qd)

    def pinv_apply(K, r):
        A = K @ K.T
        eps = 1e-12 * jnp.maximum(jnp.mean(jnp.diagonal(A)), jnp.finfo(A.dtype).tiny)
        return K.T @ prox_solve(A, r, eps)

    def step(q, _):
        K = constraint_jacobian(cm, q)
        return integrate(model, q, -pinv_apply(K, constraint_residual(cm, q))), None

    q, _ = jax.lax.scan(step, q, None, length=iters)
    K = constraint_jacobian(cm, q)
    return q, qd - pinv_apply(K, K @ qd)


def null_space(K, nv: int):
    """An orthonormal basis N (nv, k) of the velocities a constraint Jacobian K (m, nv) allows,
    K N = 0 (host-side, numpy): the right singular vectors of singular values up to 1e-10 of
    the largest (at least 1).  K without rows: the identity."""
    K = np.asarray(K, float).reshape(-1, nv)
    if not len(K):
        return np.eye(nv)
    _, s, Vt = np.linalg.svd(K)
    return Vt[int(np.sum(s > 1e-10 * max(1.0, s[0]))):].T


def check_assembled(cm: ClosedModel, q, where: str, tol: float | None = None):
    """Raise :class:`jaxdyn.errors.ModelError` naming ``where``, the violated constraints and
    their residuals unless every constraint holds at the concrete configuration q:
    max |r_i(q)| <= tol (metres for positions, radians for orientations; default the square
    root of q's machine epsilon: 1.5e-8 in float64, 3.5e-4 in float32).  Returns q."""
    r = np.abs(np.asarray(constraint_residual(cm, q)))
    tol = float(np.sqrt(np.finfo(r.dtype).eps)) if tol is None else tol
    ends = np.cumsum(cm.rows)
    bad = [(name, float(r[e - n:e].max())) for name, n, e in zip(cm.names, cm.rows, ends) if n and r[e - n:e].max() > tol]
    if bad or not np.all(np.isfinite(r)):
        listed = ", ".join(f"{name!r} residual {v:.3g}" for name, v in bad) or "non-finite residual"
        raise ModelError(f"{where}: the closed chain {cm.model.name!r} is not assembled after projection "
                         f"({listed}; tolerance {tol:g}): either its loops cannot close (lengths, placements, "
                         f"a pose out of reach) or the projection started at a singular pose; start elsewhere")
    return q
