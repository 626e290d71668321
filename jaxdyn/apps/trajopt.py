"""Gradient-based trajectory optimization: direct single and multiple shooting over
:func:`jaxdyn.rollout`, with optax.

Decision variables are the zero-order-hold torques U (steps, nv) of a rollout (row k acts over
[t_k, t_k+1)), reparametrized for torque limits as ``U = L tanh(Z / L)`` (L (nv,) the limits;
``U = Z`` without limits), so every iterate respects the limits and Z is in torque units.

Cost (user-given pure functions)::

    J(Z) = sum_k running_cost(t_k, q_k, qd_k, U_k) dt + terminal_cost(q_N, qd_N)

*Single shooting* integrates one rollout from (q0, qd0).  *Multiple shooting* splits the
horizon into S segments of equal length with their own start states X_s = (q_s, qd_s)
(decision variables too, s = 1..S-1), integrates the segments in parallel (``vmap``) and
closes the defects ``d_s = (q_s(end) - q_{s+1}, qd_s(end) - qd_{s+1})`` (configuration
difference on the tangent space, as :func:`jaxdyn.difference`) by an augmented Lagrangian
``J + lam . d + rho/2 |d|^2`` (``defects="al"``, multiplier update ``lam += rho d`` after each
outer round) or a quadratic penalty (``defects="penalty"``, lam = 0).

Each round of the optimizer is one ``lax.scan`` inside ``jit``; the problem is a pytree whose
data (targets, initial state, weights, limits) are traced, so a new target reuses the
compiled programs.  It ``vmap``s: :func:`optimize` takes a batch of initial guesses
(multi-start) and a stacked model (robust optimization: the mean cost over model variants,
e.g. payload masses, with one U).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from ..errors import ArgumentError, ShapeError
from .common import optax_promotion
from ..integrators.controllers import HeldLaw
from ..integrators.rollout import Trajectory, rollout
from ..integrators.steppers import STEPPERS
from ..model.configuration import difference, normalize


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


def controls(prob: Problem, Z, model=None):
    """What :func:`jaxdyn.rollout` applies for decision variables Z (steps, nv): the held
    torques U (steps, nv) (torque parametrization) or a :class:`jaxdyn.HeldLaw`
    (acceleration parametrization)."""
    U = Z if prob.scale is None else jnp.broadcast_to(prob.scale, Z.shape) * Z
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


def _cost(prob, tr: Trajectory):
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
    return _cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])


def _segments(prob, S):
    if prob.steps % S:
        raise ArgumentError(f"multiple shooting: segments = {S} must divide steps = {prob.steps}")
    return prob.steps // S


def multiple_shooting_terms(prob: Problem, params, S, model=None):
    """(J, d): the cost () and the defects d (S - 1, nv + nv) of multiple shooting.

    params: ``{"Z": (steps, nv), "X": (S - 1, nq + nv)}`` (segment start states q, qd)."""
    return _multiple_shooting(prob, params, S, model)[:2]


def _multiple_shooting(prob, params, S, model):
    """(J, d, q_N, qd_N)."""
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
        return tr, _cost(prob, tr)

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


class Result(NamedTuple):
    """Outcome of :func:`optimize` (leading batch axes for multi-start)."""
    params: object          # Z (steps, nv) or {"Z", "X"} (multiple shooting)
    U: jax.Array            # (steps, nv) the plan: torque held over each sample; as a torque array,
                            # rollout(model, q0, qd0, U, dt, steps, stepper) is `trajectory` (variant 0)
    cost: jax.Array         # () J of the single-shooting rollout of U (mean over model variants)
    history: jax.Array      # (iterations,) objective per iteration (incl. defect terms)
    defect: jax.Array       # () max |defect| (0 for single shooting)
    trajectory: Trajectory  # single-shooting rollout of U on prob.model (variant 0 of a stack)


def _make_optimizer(name, learning_rate, memory_size):
    if name == "adam":
        return optax.adam(learning_rate)
    if name == "lbfgs":
        return optax.lbfgs(memory_size=memory_size)
    raise ArgumentError(f"optimizer must be 'adam' or 'lbfgs', got {name!r}")


def _run(f, opt, params, iterations, lbfgs):
    """Minimize f from params by ``iterations`` optax steps in one lax.scan -> (params, history)."""
    with optax_promotion():
        state = opt.init(params)
    vg = optax.value_and_grad_from_state(f) if lbfgs else jax.value_and_grad(f)

    def step(carry, i):
        p, s = carry
        v, g = vg(p, state=s) if lbfgs else vg(p)
        with optax_promotion():
            upd, s = (opt.update(g, s, p, value=v, grad=g, value_fn=f) if lbfgs else opt.update(g, s, p))
            return (optax.apply_updates(p, upd), s), v

    (params, _), hist = lax.scan(step, (params, state), jnp.arange(iterations))
    return params, hist


def _pack(J, d):
    return jnp.concatenate([J[None], d.ravel()])


def optimize(prob: Problem, Z0=None, *, shooting="single", optimizer="lbfgs", iterations=100,
             learning_rate=1e-2, segments=4, defects="al", rounds=4, rho=100.0, robust=False,
             memory_size=30, progress=None) -> Result:
    """Optimize the torques of ``prob``.

    Equality constraints c = (terminal_constraint(q_N, qd_N), multiple-shooting defects) are
    handled by an augmented Lagrangian ``J + lam . c + rho/2 |c|^2`` minimized ``rounds`` times
    (``iterations`` optimizer steps each) with ``lam += rho c`` between rounds
    (``defects="penalty"`` keeps lam = 0).  Without constraints there is one round.

    Args:
      Z0: initial decision variables (steps, nv) (zeros if None), or (K, steps, nv) for K
        multi-starts optimized at once (vmap; the result has a leading K axis).
      shooting: "single" or "multiple" (``segments`` segments integrated in parallel).
      optimizer: "lbfgs" (optax.lbfgs with its zoom line search and ``memory_size`` pairs) or
        "adam" (``learning_rate``).
      robust: ``prob.model`` is a :func:`jaxdyn.stack` of variants (same structure, e.g.
        payload masses): minimize the mean cost (and mean constraint) over them with one U.
      progress: None or ``fn(round, iteration)`` called on the host after every round of the
        augmented Lagrangian (iteration = the round's last; progress bars).  Each round is
        one call of one compiled program (no host callback inside it, so JAX's persistent
        compilation cache can keep it).
    Returns:
      :class:`Result`; ``defect`` is max |c| at the end.

    Compilation: three programs (start, one round, the final rollout) per problem structure,
    options and Z0 shape; solving again with new data of the same structure (``dataclasses.
    replace(prob, q0=..., terminal_constraint=Partial(psi, new_target))``) runs the same
    programs (see :class:`Problem`).
    """
    if shooting not in ("single", "multiple"):
        raise ArgumentError(f"shooting must be 'single' or 'multiple', got {shooting!r}")
    if defects not in ("al", "penalty"):
        raise ArgumentError(f"defects must be 'al' or 'penalty', got {defects!r}")
    shape = (prob.steps, prob.nv)
    Z0 = jnp.zeros(shape) if Z0 is None else jnp.asarray(Z0, float)
    if Z0.shape[-2:] != shape or Z0.ndim not in (2, 3):
        raise ShapeError(f"Z0 must be (steps, nv) = {shape} or (K, steps, nv), got {Z0.shape}")
    _make_optimizer(optimizer, learning_rate, memory_size)         # validates the name
    if not isinstance(prob, Problem):
        raise ArgumentError(f"prob must be a trajopt Problem (jaxdyn.apps.trajopt.problem), got {type(prob).__name__}")
    start, round_, finish = _solver(Z0.ndim == 3, shooting, optimizer, int(iterations), float(learning_rate),
                                    int(segments), defects, float(rho), bool(robust), int(memory_size))
    params, lam = start(prob, Z0)
    hists = []
    for r in range(int(rounds) if lam.shape[-1] else 1):
        params, lam, h = round_(prob, params, lam)
        hists.append(h)
        if progress is not None:
            jax.block_until_ready(lam)          # the round is done (not only dispatched)
            progress(r, iterations - 1)
    U, J, dmax, tr = finish(prob, params)
    return Result(params, U, J, jnp.concatenate(hists, -1), dmax, tr)


@functools.lru_cache(maxsize=32)
def _solver(batched, shooting, optimizer, iterations, learning_rate, segments, defects, rho, robust, memory_size):
    """The compiled pieces of :func:`optimize` for one set of options: ``start(prob, Z0)``,
    ``round_(prob, params, lam)`` (one round of the augmented Lagrangian) and
    ``finish(prob, params)`` (the final rollout), each ``jax.jit`` of a function of the problem
    (a pytree), so problems of one structure share the programs and new data (targets, initial
    states, weights, limits) reuse them."""
    opt = _make_optimizer(optimizer, learning_rate, memory_size)
    lbfgs = optimizer == "lbfgs"
    S = segments

    def mean(fn):
        if robust:
            return lambda p, prob: jnp.mean(jax.vmap(lambda m: fn(p, prob, m))(prob.model), 0)
        return lambda p, prob: fn(p, prob, prob.model)

    def model0(prob):
        return jax.tree_util.tree_map(lambda x: x[0], prob.model) if robust else prob.model

    def psi(prob, q, qd):
        if prob.terminal_constraint is None:
            return jnp.zeros((0,), q.dtype)
        return prob.terminal_constraint(q, qd)

    def terms_one(p, prob, m):
        if shooting == "single":
            tr = simulate(prob, p, m)
            J = _cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])
            return _pack(J, psi(prob, tr.q[-1], tr.qd[-1]))
        J, d, qN, qdN = _multiple_shooting(prob, p, S, m)
        return _pack(J, jnp.concatenate([psi(prob, qN, qdN), d.ravel()]))

    terms = mean(terms_one)
    single = mean(lambda Z, prob, m: single_shooting_cost(prob, Z, m))

    def start(prob, Z):
        params = Z if shooting == "single" else multiple_shooting_init(prob, Z, S, model0(prob))
        nc = jax.eval_shape(terms, params, prob).shape[0] - 1
        return params, jnp.zeros(nc, Z.dtype)

    def round_(prob, params, lam):
        def f(p):
            jc = terms(p, prob)
            J, c = jc[0], jc[1:]
            return J + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c)

        params, hist = _run(f, opt, params, iterations, lbfgs)
        c = terms(params, prob)[1:]
        return params, (lam + rho * c if defects == "al" else lam), hist

    def finish(prob, params):
        Zf = params if shooting == "single" else params["Z"]
        tr = simulate(prob, Zf, model0(prob))
        if shooting == "single" and not robust:     # one final rollout serves every output
            J = _cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])
            c = psi(prob, tr.q[-1], tr.qd[-1])
        else:
            J, c = single(Zf, prob), terms(params, prob)[1:]
        dmax = jnp.max(jnp.abs(c)) if c.shape[0] else jnp.zeros((), Zf.dtype)
        return tr.tau[:-1], J, dmax, tr

    if batched:                                 # K starts share the problem
        start, round_, finish = jax.vmap(start, (None, 0)), jax.vmap(round_, (None, 0, 0)), jax.vmap(finish, (None, 0))
    return jax.jit(start), jax.jit(round_), jax.jit(finish)


def effort(U, dt):
    """Control effort sum_k |U_k|^2 dt of (steps, nv) torques (the minimum-effort cost)."""
    return jnp.sum(jnp.asarray(U) ** 2) * dt


def payload_variants(model, body, extra_masses):
    """K copies of ``model`` (parameters with a leading axis K, for ``jax.vmap``) with
    ``extra_masses`` (K,) added at the COM of ``body`` (name or index): robust optimization
    over an uncertain payload."""
    if isinstance(body, str):
        if body not in model.body_names:
            raise ArgumentError(f"payload body {body!r} not in model {model.name!r}; bodies: {list(model.body_names)}")
        b = model.body_names.index(body)
    else:
        b = int(body)
    masses = jnp.stack([model.mass.at[b].add(float(dm)) for dm in extra_masses])
    return jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (len(masses),) + a.shape), model).replace(mass=masses)
