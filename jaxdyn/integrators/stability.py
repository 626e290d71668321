"""The longest step a fixed-step stepper can take on a model's joint damping.

Viscous joint damping adds ``qdd = -M(q)^-1 D qd`` (D = diag(model.damping), M with the
armature): its modes decay at the rates lambda of the generalized eigenproblem
``D x = lambda M(q) x``.  An explicit stepper of step dt damps such a mode (``v' = -lambda v``)
only while ``lambda dt`` lies in its stability interval on the negative real axis,
``[-h, 0]``, with h (:data:`STABLE_STEP`):

* "euler" (semi-implicit): ``|1 - z| <= 1``, h = 2;
* "rk4": ``|1 + z + z^2/2 + z^3/6 + z^4/24| <= 1``, h = 2.7853 (Hairer and Wanner 1996, IV.2);
* "abm" (AB4 predictor, AM4 corrector, PECE): spectral radius of the recursion on the last
  four values at most 1, h = 1.2848.

Beyond it the mode grows at every step, whatever the torques, and the rollout diverges.  A
light link on a damped joint makes a model stiff: 1 N m s on 3e-4 kg m^2 decays at
3,400 1/s, which RK4 follows only with dt < 0.8 ms.  "rkf45" chooses its own steps (bounded
by its tolerances, not by stability).  A closed chain moves in the null space of its
constraint Jacobian K, where the rates are those of ``N^T D N x = lambda N^T M N x``
(N a basis of null(K)), never larger than the tree's.
"""
from __future__ import annotations

import numpy as np

SINGULAR = 1e-10
"""M counts as singular where its smallest eigenvalue is at most SINGULAR times its largest
(example-robot-data's robots: 1.2e-7 or more, but romeo's and icub's at their neutral
configuration, 1e-17 or less: massless bodies on joints)."""

STABLE_STEP = {"euler": 2.0, "rk4": 2.785293563405282, "abm": 1.284816263106911}
"""h of each fixed-step stepper: it is stable on ``v' = -lambda v`` for ``lambda dt <= h``."""


def damping_rate(M, damping, K=None) -> float:
    """Fastest decay rate (1/s) of joint damping: the largest lambda of ``D x = lambda M x``,
    on the null space of the constraint Jacobian K (m, nv) if given.  M (nv, nv) the mass
    matrix, damping (nv,).  0 without damping; inf where M is singular on that space
    (:data:`SINGULAR`: the dynamics are singular there)."""
    from ..constraints.dynamics import null_space
    M, D = np.asarray(M, float), np.diag(np.asarray(damping, float))
    if not D.any():
        return 0.0
    if K is not None:
        N = null_space(K, M.shape[0])
        M, D = N.T @ M @ N, N.T @ D @ N
    if M.shape[0] == 0:
        return 0.0
    w, V = np.linalg.eigh(M)
    if not w[0] > SINGULAR * w[-1]:
        return np.inf
    Mi = V / np.sqrt(w)                          # M^-1/2 (up to a rotation): Mi^T M Mi = I
    return float(np.linalg.eigvalsh(Mi.T @ D @ Mi).max())


def max_stable_step(system, q, stepper) -> float:
    """The longest dt with which ``stepper`` is stable on the joint damping of ``system`` at
    configuration q (nq,): ``STABLE_STEP[stepper] / damping_rate``; ``system`` a Model, or a
    ClosedModel (:func:`jaxdyn.close_loops`), whose rates are those on the null space of its
    constraint Jacobian at q.  inf without damping and for "rkf45"; 0 where M is singular.
    Host-side (numpy); M from :func:`jaxdyn.crba` at q."""
    from ..constraints import ClosedModel, constraint_jacobian
    closed = isinstance(system, ClosedModel)
    model = system.model if closed else system
    if stepper not in STABLE_STEP or not np.any(np.asarray(model.damping)):
        return np.inf
    from ..batching import crba
    K = np.asarray(constraint_jacobian(system, q)) if closed else None
    rate = damping_rate(np.asarray(crba(model, q)), model.damping, K)
    return STABLE_STEP[stepper] / rate if rate > 0 else np.inf
