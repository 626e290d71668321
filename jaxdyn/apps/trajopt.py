"""Gradient-based trajectory optimization with optax: direct single and multiple shooting
over :func:`jaxdyn.rollout`, and the kinematic transcription of the acceleration
parametrization (:func:`kinematic_rollout`) with a Gauss-Newton restoration on the rollout.
The problem, its controls, rollouts, costs and replay are
:mod:`jaxdyn.apps.trajopt_problem` (re-exported here); this module minimizes it.

Equality constraints (a terminal constraint, the multiple-shooting defects d) are closed by an
augmented Lagrangian ``J + lam . d + rho/2 |d|^2`` (``defects="al"``, multiplier update
``lam += rho d`` after each outer round) or a quadratic penalty (``defects="penalty"``,
lam = 0).

The penalty makes the rows of a terminal constraint rho times stiffer than the cost, which
slows a quasi-Newton method down; with ``precondition=True`` single shooting iterates on y,
Z = P y, ``P = (I + rho C^T C)^-1/2`` (:func:`preconditioner`), C (r, steps nv) the terminal
constraint's Jacobian of a double integrator driven at the start state (closed form up to the
first sample's d qdd / d Z).  For L-BFGS this is the initial Hessian ``I + rho C^T C`` instead
of a multiple of I; it suits plans within their torque limits (saturation breaks the double
integrator, see :func:`optimize`).  After the last round, Gauss-Newton steps Z <- Z - C^+ c on
the terminal constraint remove what the augmented Lagrangian leaves of it (the best iterate is
kept).  What each buys on the PUMA's default problem: ``docs/trajopt.md``.

``shooting="kinematic"`` (acceleration parametrization of a fully actuated open chain) runs the
rounds on :func:`kinematic_rollout`: the decision variables are the held accelerations, the
states follow from them in closed form and the torques are one batched RNEA over the samples,
so an evaluation has no forward dynamics and nothing sequential but the closed-form integration.
That plan, as held torques, drifts from the kinematic states (the acceleration of a held torque
moves within a sample); the restoration's Gauss-Newton steps on the RK4 rollout remove that
drift.  The result optimizes the kinematic transcription's effort, not the rollout's: with
samples short against the arm's dynamics it ends near single shooting's effort, faster; where
light links make the held torque's drift large the restoration moves the plan far from the
kinematic optimum, so single shooting is the default (figures: ``docs/trajopt.md``).

Each round of the optimizer is one loop inside ``jit``; the problem is a pytree whose
data (targets, initial state, weights, limits) are traced, so a new target reuses the
compiled programs.  It ``vmap``s: :func:`optimize` takes a batch of initial guesses
(multi-start) and a stacked model (robust optimization: the mean cost over model variants,
e.g. payload masses, with one U).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ArgumentError, ShapeError
from ..integrators.rollout import Trajectory, rollout
from ..model.configuration import integrate
from .common import optax_promotion, tree_where
from .lbfgs import lbfgs_minimize
from .trajopt_problem import (Problem as Problem, controls as controls, decision_from_torques as decision_from_torques,
                              integrated_running_cost, kinematic_rollout as kinematic_rollout, multiple_shooting,
                              multiple_shooting_init as multiple_shooting_init,
                              multiple_shooting_terms as multiple_shooting_terms, open_model as open_model,
                              problem as problem, replay as replay, simulate as simulate,
                              single_shooting_cost as single_shooting_cost)


class Result(NamedTuple):
    """Outcome of :func:`optimize` (leading batch axes for multi-start)."""
    params: object          # Z (steps, nv) or {"Z", "X"} (multiple shooting)
    U: jax.Array            # (steps, nv) the plan: torque held over each sample; as a torque array,
                            # rollout(model, q0, qd0, U, dt, steps, stepper) is `trajectory` (variant 0)
    cost: jax.Array         # () J of the single-shooting rollout of U (mean over model variants)
    history: jax.Array      # (iterations,) objective per iteration (incl. defect terms)
    defect: jax.Array       # () max |defect| (0 for single shooting)
    trajectory: Trajectory  # single-shooting rollout of U on prob.model (variant 0 of a stack)


def _make_optimizer(name, learning_rate):
    """optax.adam for "adam"; None for "lbfgs" (run by :func:`jaxdyn.apps.lbfgs.lbfgs_minimize`)."""
    if name == "adam":
        import optax
        return optax.adam(learning_rate)
    if name == "lbfgs":
        return None
    raise ArgumentError(f"optimizer must be 'adam' or 'lbfgs', got {name!r}")


def _run(f, opt, params, iterations, lbfgs, memory_size, aux0):
    """Minimize f from params by ``iterations`` steps; f returns (value, aux) with aux like
    ``aux0``.  -> (params, history, aux at params or None): L-BFGS
    (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`, which returns the aux at its minimizer) or the
    optax optimizer ``opt`` in one lax.scan (aux None)."""
    if lbfgs:
        return lbfgs_minimize(f, params, iterations, memory_size, aux0)
    import optax
    with optax_promotion():
        state = opt.init(params)

    def step(carry, i):
        p, s = carry
        v, g = jax.value_and_grad(lambda p: f(p)[0])(p)
        with optax_promotion():
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), v

    (params, _), hist = lax.scan(step, (params, state), jnp.arange(iterations))
    return params, hist, None


def _pack(J, d):
    return jnp.concatenate([J[None], d.ravel()])


RESTORE_STEPS = 8
"""Gauss-Newton steps on the terminal constraint after the last round (:func:`optimize`)."""


class Preconditioner(NamedTuple):
    """The linear map Z = P y = y + V diag(g) V^T y of :func:`preconditioner` (Z, y flattened)
    and the thin SVD C = U diag(s) V^T of the terminal constraint's approximate Jacobian."""
    V: jax.Array            # (steps nv, k) right singular vectors of C
    g: jax.Array            # (k,) 1 / sqrt(1 + rho s^2) - 1
    U: jax.Array            # (r, k) left singular vectors of C, k = min(r, steps nv)
    s: jax.Array            # (k,) singular values of C

    def apply(self, y):
        """Z = P y, y (steps, nv)."""
        return y + (self.V @ (self.g * (self.V.T @ y.ravel()))).reshape(y.shape)

    def solve(self, Z):
        """y = P^-1 Z, Z (steps, nv)."""
        h = 1.0 / (1.0 + self.g) - 1.0
        return Z + (self.V @ (h * (self.V.T @ Z.ravel()))).reshape(Z.shape)

    def correct(self, Z, c):
        """The Gauss-Newton step on psi(Z) = c -> 0: Z - C^+ c (least norm; s = 0 rows skipped)."""
        s = jnp.where(self.s > 0, self.s, 1.0)
        return Z - (self.V @ jnp.where(self.s > 0, (self.U.T @ c) / s, 0.0)).reshape(Z.shape)


def preconditioner(prob: Problem, rho, model=None) -> Preconditioner:
    """P = (I + rho C^T C)^-1/2 for the terminal constraint psi(q_N, qd_N) (r,) of ``prob``.

    C (r, steps nv) is d psi / d Z of the double integrator qdd_k = K Z_k held over each
    sample: q_N = q0 (+) (N dt qd0 + sum_k dt^2 (N - k - 1/2) K Z_k), qd_N = qd0 + sum_k dt K Z_k,
    with K = d qdd / d Z (nv, nv) at the start state and Z = 0 (the inverse inertia for
    torques, the identity for accelerations; torque limits, actuation and closed loops
    included: it is d qd_1 / d Z / dt of one semi-implicit Euler sample, by central
    differences, exact up to rounding where no limit bends it: qd_1 is affine in the torque)
    and psi's Jacobian at (q0, qd0) on the tangent space.  With C = U diag(s) V^T (thin SVD),
    P = I + V diag(g) V^T, g = (1 + rho s^2)^-1/2 - 1, so P^T (I + rho C^T C) P = I.  No
    terminal constraint: V (steps nv, 0).  Where the plan's torques saturate their limits,
    or the dynamics move the accelerations far from K Z, C is a rough guess."""
    m = prob.model if model is None else model
    N, nv, dtype = prob.steps, prob.nv, prob.q0.dtype
    if prob.terminal_constraint is None:
        return Preconditioner(jnp.zeros((N * nv, 0), dtype), jnp.zeros((0,), dtype), jnp.zeros((0, 0), dtype),
                              jnp.zeros((0,), dtype))
    mo = open_model(m)

    def qd_1(z):
        return rollout(m, prob.q0, prob.qd0, controls(prob, z[None], m), prob.dt, 1, stepper="euler",
                       method=prob.method, stabilization=prob.stabilization).qd[-1]

    h = float(jnp.finfo(dtype).eps) ** (1 / 3)          # central differences (qd_1 is affine in z without limits)
    K = lax.map(lambda e: (qd_1(e) - qd_1(-e)) / (2 * h), h * jnp.eye(nv, dtype=dtype)).T / prob.dt   # (nv, nv)
    Cs = jax.jacfwd(lambda x: prob.terminal_constraint(integrate(mo, prob.q0, x[:nv]), prob.qd0 + x[nv:]))(
        jnp.zeros(2 * nv, dtype))                                                          # (r, 2 nv)
    k = jnp.arange(N, dtype=dtype)
    C = (((N - k - 0.5) * prob.dt ** 2)[None, :, None] * (Cs[:, :nv] @ K)[:, None, :]
         + prob.dt * (Cs[:, nv:] @ K)[:, None, :])                                          # (r, N, nv)
    U, s, Vt = jnp.linalg.svd(C.reshape(C.shape[0], N * nv), full_matrices=False)
    return Preconditioner(Vt.T, 1.0 / jnp.sqrt(1.0 + rho * s * s) - 1.0, U, s)


def optimize(prob: Problem, Z0=None, *, shooting="single", optimizer="lbfgs", iterations=100,
             learning_rate=1e-2, segments=4, defects="al", rounds=4, rho=100.0, robust=False,
             memory_size=30, precondition=False, progress=None) -> Result:
    """Optimize the torques of ``prob``.

    Equality constraints c = (terminal_constraint(q_N, qd_N), multiple-shooting defects) are
    handled by an augmented Lagrangian ``J + lam . c + rho/2 |c|^2`` minimized ``rounds`` times
    (``iterations`` optimizer steps each) with ``lam += rho c`` between rounds
    (``defects="penalty"`` keeps lam = 0).  Without constraints there is one round.

    Args:
      Z0: initial decision variables (steps, nv) (zeros if None), or (K, steps, nv) for K
        multi-starts optimized at once (vmap; the result has a leading K axis).
      shooting: "single", "multiple" (``segments`` segments integrated in parallel) or
        "kinematic" (the rounds minimize the :func:`kinematic_rollout` transcription, the
        acceleration parametrization of an open chain without actuation mask; the
        restoration then makes the held-torque rollout reach the terminal constraint; see the
        module docstring for where it suits).
      optimizer: "lbfgs" (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`, ``memory_size`` pairs) or
        "adam" (``learning_rate``).
      robust: ``prob.model`` is a :func:`jaxdyn.stack` of variants (same structure, e.g.
        payload masses): minimize the mean cost (and mean constraint) over them with one U.
      precondition: single shooting iterates on y, Z = P y (:func:`preconditioner`) instead
        of on Z.  Where the arm moves within its torque limits this converges in a fraction
        of the rounds (PUMA point-to-point: 2 rounds to effort 3294.6, against 8 rounds to
        3320.2 without); where the plan's torques saturate their limits its double integrator
        is a poor model (torque-limited double-pendulum swing-up, 12 rounds, 4 starts: effort
        351 and terminal error 6.7e-3, against 113 and 1.6e-4 without).
      progress: None or ``fn(round, iteration)`` called on the host after every round of the
        augmented Lagrangian (iteration = the round's last; progress bars).  Each round is
        one call of one compiled program (no host callback inside it, so JAX's persistent
        compilation cache can keep it).
    Returns:
      :class:`Result`; ``defect`` is max |c| at the end.

    Single and kinematic shooting end with up to RESTORE_STEPS Gauss-Newton steps on the
    terminal constraint of the rollout (``prob.stepper`` at dt) with the preconditioner's C
    (the iterate of least max |c| is kept); ``Result.params`` is Z.  ``Result.cost``,
    ``defect`` and ``trajectory`` are the rollout's (never the kinematic transcription's);
    ``history`` is the rounds' objective.

    Compilation: four programs (the preconditioner, start, one round, the final rollout) per
    problem structure, options and Z0 shape; solving again with new data of the same structure (``dataclasses.
    replace(prob, q0=..., terminal_constraint=Partial(psi, new_target))``) runs the same
    programs (see :class:`Problem`).
    """
    if not isinstance(prob, Problem):
        raise ArgumentError(f"prob must be a trajopt Problem (jaxdyn.apps.trajopt.problem), got {type(prob).__name__}")
    if shooting not in ("single", "multiple", "kinematic"):
        raise ArgumentError(f"shooting must be 'single', 'multiple' or 'kinematic', got {shooting!r}")
    closed = open_model(prob.model) is not prob.model
    if shooting == "kinematic" and (prob.parametrization != "acceleration" or prob.actuation is not None or closed):
        raise ArgumentError("shooting='kinematic' needs the acceleration parametrization of a fully actuated "
                            f"open chain (got parametrization {prob.parametrization!r}"
                            + (", an actuation mask" if prob.actuation is not None else "")
                            + (", a closed model" if closed else "") + ")")
    if defects not in ("al", "penalty"):
        raise ArgumentError(f"defects must be 'al' or 'penalty', got {defects!r}")
    shape = (prob.steps, prob.nv)
    Z0 = jnp.zeros(shape) if Z0 is None else jnp.asarray(Z0, float)
    if Z0.shape[-2:] != shape or Z0.ndim not in (2, 3):
        raise ShapeError(f"Z0 must be (steps, nv) = {shape} or (K, steps, nv), got {Z0.shape}")
    _make_optimizer(optimizer, learning_rate)         # validates the name
    precondition, start, round_, finish = _solver(Z0.ndim == 3, shooting, optimizer, int(iterations),
                                                  float(learning_rate), int(segments), defects, float(rho),
                                                  bool(robust), int(memory_size), bool(precondition))
    pre = precondition(prob)
    params, lam = start(prob, Z0)
    hists = []
    for r in range(int(rounds) if lam.shape[-1] else 1):
        params, lam, h = round_(prob, params, lam, pre)
        hists.append(h)
        if progress is not None:
            jax.block_until_ready(lam)          # the round is done (not only dispatched)
            progress(r, iterations - 1)
    params, U, J, dmax, tr = finish(prob, params, pre)
    return Result(params, U, J, jnp.concatenate(hists, -1), dmax, tr)


@functools.lru_cache(maxsize=32)
def _solver(batched, shooting, optimizer, iterations, learning_rate, segments, defects, rho, robust, memory_size,
            use_p):
    """The compiled pieces of :func:`optimize` for one set of options: ``precondition(prob)``
    (:func:`preconditioner` for single shooting, with P = I unless ``use_p``; None for multiple
    shooting), ``start(prob,
    Z0)`` (the decision variables and zero multipliers), ``round_(prob, params, lam, pre)``
    (one round of the augmented Lagrangian, iterating on y = P^-1 Z) and ``finish(prob,
    params, pre)`` (the terminal restoration and the final rollout), each ``jax.jit`` of a
    function of the problem (a pytree), so problems of one structure share the programs and
    new data (targets, initial states, weights, limits) reuse them."""
    opt = _make_optimizer(optimizer, learning_rate)
    lbfgs = optimizer == "lbfgs"
    rounds_on = kinematic_rollout if shooting == "kinematic" else simulate     # the rounds' transcription
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

    def single_terms(Z, prob, m, transcribe=simulate):
        """(rollout, J, c) of single-shooting Z on the model m (``transcribe=kinematic_rollout``:
        of the kinematic transcription)."""
        tr = transcribe(prob, Z, m)
        J = integrated_running_cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])
        return tr, J, psi(prob, tr.q[-1], tr.qd[-1])

    def terms_one(p, prob, m):
        if shooting != "multiple":
            return _pack(*single_terms(p, prob, m, rounds_on)[1:])
        J, d, qN, qdN = multiple_shooting(prob, p, S, m)
        return _pack(J, jnp.concatenate([psi(prob, qN, qdN), d.ravel()]))

    terms = mean(terms_one)
    single = mean(lambda Z, prob, m: single_shooting_cost(prob, Z, m))

    def precondition(prob):
        if shooting == "multiple":
            return None
        pre = preconditioner(prob, rho, model0(prob))
        return pre if use_p else pre._replace(g=jnp.zeros_like(pre.g))

    def start(prob, Z):
        params = Z if shooting != "multiple" else multiple_shooting_init(prob, Z, S, model0(prob))
        nc = jax.eval_shape(terms, params, prob).shape[0] - 1
        return params, jnp.zeros(nc, Z.dtype)

    def round_(prob, params, lam, pre):
        decision = (lambda y: y) if pre is None else pre.apply

        def f(y):
            jc = terms(decision(y), prob)
            J, c = jc[0], jc[1:]
            return J + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c), c

        y, hist, c = _run(f, opt, params if pre is None else pre.solve(params), iterations, lbfgs, memory_size,
                          jnp.zeros_like(lam))
        params = decision(y)
        if c is None:                   # L-BFGS returns c at its minimizer; optax's loop does not
            c = terms(params, prob)[1:]
        return params, (lam + rho * c if defects == "al" else lam), hist

    def outcome(prob, Z):
        """(rollout on variant 0, J, c) of single-shooting Z; J and c are means over the variants
        if robust."""
        if not robust:
            return single_terms(Z, prob, prob.model)
        trs, Js, cs = jax.vmap(lambda m: single_terms(Z, prob, m))(prob.model)
        return jax.tree_util.tree_map(lambda x: x[0], trs), jnp.mean(Js), jnp.mean(cs, 0)

    def restore(prob, Z, pre):
        """The outcome of the best of Z and RESTORE_STEPS Gauss-Newton iterates Z <- Z - C^+ c on
        the terminal constraint c (the least max |c|; none without a constraint).  The
        iteration need not lower max |c| at every step; the best iterate is kept, so the plan
        is never worse than the optimizer's.  One rollout per step gives its outputs."""
        def step(k, carry):
            best, Z_try = carry
            new = (Z_try,) + outcome(prob, Z_try)
            cmax = lambda c: jnp.max(jnp.abs(c), initial=0.0)
            best = tree_where((k == 0) | (cmax(new[3]) < cmax(best[3])), new, best)
            return best, pre.correct(Z_try, new[3])

        init = jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(lambda Z: (Z,) + outcome(prob, Z), Z))
        n = RESTORE_STEPS if prob.terminal_constraint is not None else 0
        return lax.fori_loop(0, n + 1, step, (init, Z))[0]

    def finish(prob, params, pre):
        if shooting != "multiple":
            params, tr, J, c = restore(prob, params, pre)
        else:
            tr = simulate(prob, params["Z"], model0(prob))
            J, c = single(params["Z"], prob), terms(params, prob)[1:]
        dmax = jnp.max(jnp.abs(c)) if c.shape[0] else jnp.zeros((), J.dtype)
        return params, tr.tau[:-1], J, dmax, tr

    if batched:                                 # K starts share the problem and its preconditioner
        start, round_ = jax.vmap(start, (None, 0)), jax.vmap(round_, (None, 0, 0, None))
        finish = jax.vmap(finish, (None, 0, None))
    return jax.jit(precondition), jax.jit(start), jax.jit(round_), jax.jit(finish)


def effort(U, dt):
    """Control effort sum_k |U_k|^2 dt of (steps, nv) torques (the minimum-effort cost): a JAX
    value for a JAX array (or tracer), a NumPy one for anything else (no device op on the host)."""
    U = U if isinstance(U, jax.Array) else np.asarray(U)
    return (U ** 2).sum() * dt


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
