"""Gradient-based trajectory optimization with optax: direct single and multiple shooting
over :func:`jaxdyn.rollout`.  The problem, its controls, rollouts, costs and replay are
:mod:`jaxdyn.apps.trajopt_problem` (re-exported here); this module minimizes it.

Equality constraints (a terminal constraint, the multiple-shooting defects d) are closed by an
augmented Lagrangian ``J + lam . d + rho/2 |d|^2`` (``defects="al"``, multiplier update
``lam += rho d`` after each outer round) or a quadratic penalty (``defects="penalty"``,
lam = 0).

Each round of the optimizer is one ``lax.scan`` inside ``jit``; the problem is a pytree whose
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
import optax
from jax import lax

from ..errors import ArgumentError, ShapeError
from ..integrators.rollout import Trajectory
from .common import optax_promotion
from .lbfgs import lbfgs_minimize
from .trajopt_problem import (Problem as Problem, controls as controls, decision_from_torques as decision_from_torques,
                              integrated_running_cost, multiple_shooting, multiple_shooting_init as multiple_shooting_init,
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
        return optax.adam(learning_rate)
    if name == "lbfgs":
        return None
    raise ArgumentError(f"optimizer must be 'adam' or 'lbfgs', got {name!r}")


def _run(f, opt, params, iterations, lbfgs, memory_size):
    """Minimize f from params by ``iterations`` steps -> (params, history): L-BFGS
    (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`) or the optax optimizer ``opt`` in one lax.scan."""
    if lbfgs:
        return lbfgs_minimize(f, params, iterations, memory_size)
    with optax_promotion():
        state = opt.init(params)

    def step(carry, i):
        p, s = carry
        v, g = jax.value_and_grad(f)(p)
        with optax_promotion():
            upd, s = opt.update(g, s, p)
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
      optimizer: "lbfgs" (:func:`jaxdyn.apps.lbfgs.lbfgs_minimize`, ``memory_size`` pairs) or
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
    _make_optimizer(optimizer, learning_rate)         # validates the name
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
    opt = _make_optimizer(optimizer, learning_rate)
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
            J = integrated_running_cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])
            return _pack(J, psi(prob, tr.q[-1], tr.qd[-1]))
        J, d, qN, qdN = multiple_shooting(prob, p, S, m)
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

        params, hist = _run(f, opt, params, iterations, lbfgs, memory_size)
        c = terms(params, prob)[1:]
        return params, (lam + rho * c if defects == "al" else lam), hist

    def finish(prob, params):
        Zf = params if shooting == "single" else params["Z"]
        tr = simulate(prob, Zf, model0(prob))
        if shooting == "single" and not robust:     # one final rollout serves every output
            J = integrated_running_cost(prob, tr) + prob.terminal_cost(tr.q[-1], tr.qd[-1])
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
