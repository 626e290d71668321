"""The transcription of a trajectory-optimization problem (:mod:`jaxdyn.apps.trajopt` optimizes
it): the :class:`Problem` pytree, the controls of its decision variables, the single- and
multiple-shooting rollouts and costs, and the open-loop replay of a plan.

Decision variables Z (steps, nv) are the zero-order-hold torques U of a rollout (row k acts
over [t_k, t_k+1)), reparametrized for torque limits as ``U = L tanh(Z / L)`` (L (nv,) the
limits; ``U = Z`` without limits), so every iterate respects the limits and Z is in torque
units; or, with the acceleration parametrization, joint accelerations whose inverse dynamics
give the held torques (:class:`Problem`).

Cost (user-given pure functions)::

    J(Z) = sum_k running_cost(t_k, q_k, qd_k, U_k) dt + terminal_cost(q_N, qd_N)

*Single shooting* integrates one rollout from (q0, qd0).  *Multiple shooting* splits the
horizon into S segments of equal length with their own start states X_s = (q_s, qd_s)
(decision variables too, s = 1..S-1), integrates the segments in parallel (``vmap``) and
returns the defects ``d_s = (q_s(end) - q_{s+1}, qd_s(end) - qd_{s+1})`` (configuration
difference on the tangent space, as :func:`jaxdyn.difference`).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ArgumentError, ShapeError
from ..integrators.controllers import HeldLaw
from ..integrators.rollout import Trajectory, rollout
from ..integrators.steppers import STEPPERS
from ..model.configuration import difference, integrate, normalize

@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=("model", "q0", "qd0", "dt", "running_cost", "terminal_cost", "tau_limit",
                                "terminal_constraint", "scale", "actuation"),
                   meta_fields=("steps", "stepper", "method", "parametrization", "stabilization"))
@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """A trajectory-optimization problem, a pytree: its data (model parameters, q0, qd0, dt,
    limits, scale, actuation and the cost functions' data) are traced arguments of the
    compiled optimizer; its structure (``steps``, ``stepper``, ``method``, ``parametrization``,
    ``stabilization``, the model's topology and the cost *functions*) selects the program.
    The cost functions are :class:`jax.tree_util.Partial` s (:func:`problem` wraps plain
    functions): ``Partial(fn, *data)`` carries targets and weights as data, so a new target
    reuses the compiled program; a new plain function (a new lambda) compiles a new one.

    Attributes:
      model: the robot (or a :func:`jaxdyn.stack` of variants for robust optimization).
      q0 (nq,), qd0 (nv,): the initial state.
      dt, steps: sample length and number of samples (horizon T = steps dt).
      running_cost: ``l(t, q (nq,), qd (nv,), u (nv,)) -> ()``, integrated by the rectangle rule.
      terminal_cost: ``phi(q_N (nq,), qd_N (nv,)) -> ()``.
      tau_limit: None or (nv,) symmetric torque limits L > 0 (``U = L tanh(Z / L)``; +inf: that
        dof unlimited; e.g. ``model.effort_limit``).
      stepper, method: passed to :func:`jaxdyn.rollout` ("rk4" and "aba" by default).
      terminal_constraint: None or ``psi(q_N, qd_N) -> (r,)``, driven to 0 by the augmented
        Lagrangian of :func:`optimize` (e.g. reach a target exactly).
      scale: None or (nv,) torque scale s: ``U = s Z`` (inside the limits' tanh), a diagonal
        preconditioner.  :func:`problem` sets s = diag M(q0) with ``scale="inertia"``, which
        equalizes the joints' sensitivities (wrist vs base inertias differ by 100x on a PUMA).
      parametrization: "torque" (Z are the held torques) or "acceleration" (Z[k] is the joint
        acceleration at the start of sample k: the torque ``tau_k = rnea(q_k, qd_k, Z[k])``
        (then limited) is computed from the sample's start state and held over the sample, a
        :class:`jaxdyn.HeldLaw`): the terminal state is then nearly linear in Z, which
        conditions reaching problems far better (Z (steps, nv) are tangent-space
        accelerations, so free-flyer bases work too).  Either way the plan is a torque
        sequence: :attr:`Result.U` replayed open-loop on ``stepper`` at dt is the optimized
        trajectory.
      actuation: None or (nv,) 0/1 mask of actuated dofs (the torques are ``mask * U``).
      stabilization: Baumgarte gains for a closed model (:func:`jaxdyn.close_loops`), passed
        to :func:`jaxdyn.rollout`.  ``model`` may be a ClosedModel: the rollouts are then
        constrained (``method`` "schur" by default).
    """
    model: object
    q0: jax.Array
    qd0: jax.Array
    dt: float | jax.Array
    steps: int
    running_cost: Callable
    terminal_cost: Callable
    tau_limit: jax.Array | None = None
    stepper: str = "rk4"
    method: str = "aba"
    terminal_constraint: Callable | None = None
    scale: jax.Array | None = None
    parametrization: str = "torque"
    actuation: jax.Array | None = None
    stabilization: tuple | None = None

    @property
    def nv(self):
        return self.qd0.shape[-1]


def problem(model, q0, qd0, dt, steps, running_cost, terminal_cost=None, tau_limit=None, stepper="rk4",
            method="aba", terminal_constraint=None, scale=None, parametrization="torque", actuation=None,
            stabilization=None) -> Problem:
    """A validated :class:`Problem` (shapes of q0/qd0/tau_limit, stepper name, positive steps).
    Cost functions that are not :class:`jax.tree_util.Partial` s are wrapped as ``Partial(fn)``
    (their identity then selects the compiled program: pass ``Partial(fn, target, ...)`` with
    a module-level ``fn`` to solve for new targets without compiling again)."""
    q0, qd0 = jnp.asarray(q0, float), jnp.asarray(qd0, float)
    base = open_model(model)
    nq, nv = base.nq, base.nv
    if q0.shape != (nq,) or qd0.shape != (nv,):
        raise ShapeError(f"q0 must be ({nq},) and qd0 ({nv},) for model {base.name!r}, got {q0.shape}, {qd0.shape}")
    if stepper not in STEPPERS or stepper == "rkf45":
        raise ArgumentError(f"trajopt stepper must be a fixed-step one of euler|rk4|abm, got {stepper!r}")
    if int(steps) < 1:
        raise ArgumentError(f"steps must be a positive int, got {steps!r}")
    if not (np.isfinite(float(dt)) and float(dt) > 0):
        raise ArgumentError(f"dt must be a positive finite number, got {dt!r}")
    if tau_limit is not None:
        tau_limit = jnp.broadcast_to(jnp.asarray(tau_limit, float), (nv,))
        if not bool(jnp.all(tau_limit > 0)):      # NaN fails too
            raise ArgumentError(f"tau_limit must be > 0 per dof (+inf: that dof unlimited; tau_limit=None: none), "
                                f"got {np.asarray(tau_limit).tolist()}")
    if terminal_cost is None:
        terminal_cost = _no_terminal_cost
    for nm, f in (("running_cost", running_cost), ("terminal_cost", terminal_cost),
                  ("terminal_constraint", terminal_constraint)):
        if f is not None and not callable(f):
            raise ArgumentError(f"{nm} must be a callable, got {type(f).__name__}")
    running_cost, terminal_cost, terminal_constraint = (
        f if f is None or isinstance(f, jax.tree_util.Partial) else jax.tree_util.Partial(f)
        for f in (running_cost, terminal_cost, terminal_constraint))
    if isinstance(scale, str):
        if scale != "inertia":
            raise ArgumentError(f"scale must be None, 'inertia' or (nv,) numbers, got {scale!r}")
        from ..batching import crba
        scale = jnp.diag(crba(base, q0))
    if scale is not None:
        scale = jnp.broadcast_to(jnp.asarray(scale, float), (nv,))
        if not bool(jnp.all(scale > 0)):
            raise ArgumentError(f"scale must be > 0, got {np.asarray(scale)}")
    if parametrization not in ("torque", "acceleration"):
        raise ArgumentError(f"parametrization must be 'torque' or 'acceleration', got {parametrization!r}")
    if actuation is not None:
        actuation = jnp.asarray(actuation, float)
        if actuation.shape != (nv,):
            raise ShapeError(f"actuation must be an (nv,) = ({nv},) mask, got {actuation.shape}")
    if stabilization is not None and base is model:
        raise ArgumentError("stabilization applies to closed models (jaxdyn.close_loops) only")
    if base is not model and method == "aba":
        method = "schur"
    return Problem(model, q0, qd0, float(dt), int(steps), running_cost, terminal_cost, tau_limit, stepper, method,
                   terminal_constraint, scale, parametrization, actuation,
                   None if stabilization is None else tuple(float(x) for x in stabilization))


def _no_terminal_cost(q, qd):
    return jnp.zeros((), q.dtype)


def open_model(model):
    """The tree Model of a model or of a ClosedModel."""
    from ..constraints import ClosedModel
    return model.model if isinstance(model, ClosedModel) else model


def _through_limit(f, tau_limit, U):
    """``L f(U / L)`` per entry where the limit L is finite, U where it is +inf (no inf enters
    the branch ``jnp.where`` drops, so its gradient stays finite)."""
    L = jnp.broadcast_to(tau_limit, U.shape)
    fin = jnp.isfinite(L)
    Lf = jnp.where(fin, L, 1.0)
    return jnp.where(fin, Lf * f(U / Lf), U)


def _limit(tau_limit, actuation, U):
    """``L tanh(U / L)`` (L = tau_limit, if any), times the actuation mask (if any)."""
    if tau_limit is not None:
        U = _through_limit(jnp.tanh, tau_limit, U)
    if actuation is not None:
        U = jnp.broadcast_to(actuation, U.shape) * U
    return U


def _accel_law(model, tau_limit, actuation, z, t, q, qd):
    """The acceleration parametrization's law: rnea(q, qd, z), limited."""
    from ..batching import rnea
    return _limit(tau_limit, actuation, rnea(model, q, qd, z))


def _scaled(prob: Problem, Z):
    """s Z (``prob.scale`` s, if any)."""
    return Z if prob.scale is None else jnp.broadcast_to(prob.scale, Z.shape) * Z


def controls(prob: Problem, Z, model=None):
    """What :func:`jaxdyn.rollout` applies for decision variables Z (steps, nv): the held
    torques U (steps, nv) (torque parametrization) or a :class:`jaxdyn.HeldLaw`
    (acceleration parametrization)."""
    U = _scaled(prob, Z)
    if prob.parametrization == "torque":
        return _limit(prob.tau_limit, prob.actuation, U)
    m = open_model(prob.model if model is None else model)
    return HeldLaw(U, jax.tree_util.Partial(_accel_law, m, prob.tau_limit, prob.actuation))


def decision_from_torques(prob: Problem, U):
    """Z with ``controls(prob, Z) == U`` (U clipped to 0.999 of the limits): warm starts of
    the torque parametrization."""
    U = jnp.asarray(U, float)
    if prob.tau_limit is not None:
        U = _through_limit(lambda x: jnp.arctanh(jnp.clip(x, -0.999, 0.999)), prob.tau_limit, U)
    return U if prob.scale is None else U / jnp.broadcast_to(prob.scale, U.shape)


def integrated_running_cost(prob: Problem, tr: Trajectory):
    """Rectangle rule of the running cost at the samples; u = the torque applied at sample k."""
    run = jax.vmap(prob.running_cost)(tr.t[:-1], tr.q[:-1], tr.qd[:-1], tr.tau[:-1])
    return jnp.sum(run) * prob.dt


def simulate(prob: Problem, Z, model=None) -> Trajectory:
    """The single-shooting rollout of Z (steps, nv) from (q0, qd0)."""
    m = prob.model if model is None else model
    return rollout(m, prob.q0, prob.qd0, controls(prob, Z, m), prob.dt, prob.steps, stepper=prob.stepper,
                   method=prob.method, stabilization=prob.stabilization)


def single_shooting_cost(prob: Problem, Z, model=None):
    """J(Z) () of one rollout from (q0, qd0)."""
    tr = simulate(prob, Z, model)
    return integrated_running_cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])


def kinematic_rollout(prob: Problem, Z, model=None) -> Trajectory:
    """The kinematic transcription of the acceleration parametrization: the accelerations Z
    (steps, nv) held over each sample and integrated exactly,
    ``q_k+1 = q_k (+) (dt qd_k + dt^2/2 Z_k)``, ``qd_k+1 = qd_k + dt Z_k`` (``(+)`` is
    :func:`jaxdyn.integrate`), with the torques of inverse dynamics at the samples,
    ``tau_k = rnea(q_k, qd_k, Z_k)`` (limited and masked as :func:`controls`), one batched
    RNEA over the samples: no forward dynamics, a fraction of a rollout's cost.

    It is :func:`simulate`'s held-torque rollout of the same Z up to the drift of the
    acceleration within a sample (the torque is held, M(q) and h(q, qd) move): the two agree
    on the first sample's acceleration and drift apart over the horizon (PUMA default
    point-to-point, 100 samples of 20 ms: ~1 rad at the end), which the restoration of
    :func:`jaxdyn.apps.trajopt.optimize` (``shooting="kinematic"``) removes.
    Returns a :class:`jaxdyn.Trajectory` (``tau[-1]`` repeats ``tau[-2]``).
    """
    if prob.parametrization != "acceleration":
        raise ArgumentError(f"the kinematic transcription needs parametrization='acceleration', "
                            f"got {prob.parametrization!r}")
    m = open_model(prob.model if model is None else model)
    A = _scaled(prob, Z)
    dt = prob.dt

    def step(x, a):
        q, v = x
        return (normalize(m, integrate(m, q, dt * v + 0.5 * dt * dt * a)), v + dt * a), x

    end, (Q, V) = lax.scan(step, (prob.q0, prob.qd0), A)
    Q, V = jnp.concatenate([Q, end[0][None]]), jnp.concatenate([V, end[1][None]])
    tau = jax.vmap(lambda q, v, a: _accel_law(m, prob.tau_limit, prob.actuation, a, None, q, v))(Q[:-1], V[:-1], A)
    tau = jnp.concatenate([tau, tau[-1:]])
    t = jnp.arange(prob.steps + 1, dtype=Q.dtype) * dt
    ok = jnp.all(jnp.isfinite(Q)) & jnp.all(jnp.isfinite(V)) & jnp.all(jnp.isfinite(tau))
    return Trajectory(t, Q, V, tau, jnp.int32(prob.steps), jnp.int32(0), ok)


def _segments(prob, S):
    if prob.steps % S:
        raise ArgumentError(f"multiple shooting: segments = {S} must divide steps = {prob.steps}")
    return prob.steps // S


def multiple_shooting_terms(prob: Problem, params, S, model=None):
    """(J, d): the cost () and the defects d (S - 1, nv + nv) of multiple shooting.

    params: ``{"Z": (steps, nv), "X": (S - 1, nq + nv)}`` (segment start states q, qd)."""
    return multiple_shooting(prob, params, S, model)[:2]


def multiple_shooting(prob: Problem, params, S, model=None):
    """(J, d, q_N, qd_N): :func:`multiple_shooting_terms` and the last segment's end state."""
    m = prob.model if model is None else model
    n = _segments(prob, S)
    nq = prob.q0.shape[0]
    Z, X = params["Z"], params["X"]
    Zs = Z.reshape(S, n, -1)
    mo = open_model(m)
    qs = jnp.concatenate([prob.q0[None], jax.vmap(lambda q: normalize(mo, q))(X[:, :nq])], 0)
    vs = jnp.concatenate([prob.qd0[None], X[:, nq:]], 0)
    t0 = jnp.arange(S, dtype=prob.q0.dtype) * (n * prob.dt)

    def seg(q, v, z, t):
        tr = rollout(m, q, v, controls(prob, z, m), prob.dt, n, stepper=prob.stepper, method=prob.method, t0=t,
                     stabilization=prob.stabilization)
        return tr, integrated_running_cost(prob, tr)

    trs, run = jax.vmap(seg)(qs, vs, Zs, t0)
    J = jnp.sum(run) + prob.terminal_cost(trs.q[-1, -1], trs.qd[-1, -1])
    dq = jax.vmap(lambda a, b: difference(mo, b, a))(trs.q[:-1, -1], qs[1:])
    d = jnp.concatenate([dq, trs.qd[:-1, -1] - vs[1:]], 1)
    return J, d, trs.q[-1, -1], trs.qd[-1, -1]


def multiple_shooting_init(prob: Problem, Z, S, model=None):
    """Multiple-shooting variables from torques-space Z (steps, nv): the segment starts are
    the single-shooting rollout's states (zero defects at the start)."""
    n = _segments(prob, S)
    tr = simulate(prob, Z, model)
    X = jnp.concatenate([tr.q[n:-1:n], tr.qd[n:-1:n]], 1)
    return {"Z": jnp.asarray(Z), "X": X}


def replay(prob: Problem, U, substeps=10, stepper="rk4", model=None) -> Trajectory:
    """Open-loop replay of a plan: the torques U (steps, nv), row k held over [t_k, t_k+1),
    integrated from (q0, qd0) by ``stepper`` at dt / ``substeps`` (RK4 at dt / 10 by default:
    an accurate check of the plan, independent of the optimizer's model).  Returns the
    :class:`jaxdyn.Trajectory` of steps * substeps samples (its last state is the plan's end)."""
    substeps = int(substeps)
    if substeps < 1:
        raise ArgumentError(f"substeps must be a positive int, got {substeps}")
    U = jnp.asarray(U, float)
    if U.shape != (prob.steps, prob.nv):
        raise ShapeError(f"U must be (steps, nv) = {(prob.steps, prob.nv)}, got {U.shape}")
    m = prob.model if model is None else model
    return rollout(m, prob.q0, prob.qd0, jnp.repeat(U, substeps, axis=0), prob.dt / substeps, prob.steps * substeps,
                   stepper=stepper, method=prob.method, stabilization=prob.stabilization)
