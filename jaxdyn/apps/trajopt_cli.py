"""``jaxdyn trajopt [CONFIG]``: config -> problem -> optimize -> outputs (CSV, plots, summary).

Config (TOML; built-in ``trajopt_puma_p2p`` is the default)::

    [robot]      name = "puma560" | "double_pendulum" | ... | "urdf:PATH"
    [problem]    T, dt, q_final, qd_final (zeros), q0, qd0 (neutral, an MJCF robot its qpos0; zeros),
                 tau_limit (the model's effort limits, +inf entries unlimited; none if the model has none),
                 stepper ("rk4"), parametrization ("acceleration"), terminal ("constraint" |
                 "penalty"), terminal_weight (1e4, penalty only), target_joints (indices of q the
                 terminal condition constrains; all by default; q_final then lists only those),
                 actuated (0/1 per dof), stabilization ([alpha, beta], closed mechanisms),
                 limit_weight (1e6; 0 = off: the model's finite joint position limits, LIMIT_MARGIN
                 inside, as a penalty w |max(q - q_upper, 0, q_lower - q)|^2 in the running cost)
    [optimizer]  name ("lbfgs" | "adam"), iterations, rounds, rho, learning_rate, shooting
                 ("single" | "multiple" | "kinematic"), segments, multistart (1), seed, spread (init noise),
                 precondition (false; true: the terminal constraint's preconditioner, for
                 plans within their torque limits, see jaxdyn.apps.trajopt.optimize)
    [robust]     body, extra_masses (list): optimize the mean over payload variants
    [compare]    cycloidal (true): Saha's cycloidal trajectory (eq. 18) between the same
                 endpoints, its torques (inverse dynamics along it: what computed torque applies
                 when it tracks the cycloid from its start) and their effort

The cost is the control effort sum_k |tau_k|^2 dt (minimum effort), plus a penalty on leaving the
model's finite joint position limits (``limit_weight``).  The plan is the torque
column of ``trajectory.csv`` (row k held over sample k; the last row repeats the one before);
the summary gives the terminal error of the optimizer's model (``stepper`` at dt) and of an
open-loop replay of those torques on RK4 at dt / 10 (:func:`jaxdyn.apps.trajopt.replay`).
"""
from __future__ import annotations

import os
import sys
import time

from ..config import check_tables, read_toml
from ..errors import ConfigError
from . import common

SCHEMA = {
    "robot": {"name": str},
    "problem": {"T": float, "dt": float, "q0": list, "qd0": list, "q_final": list, "qd_final": list,
                "tau_limit": list, "stepper": str, "parametrization": str, "terminal": str,
                "terminal_weight": float, "target_joints": list, "actuated": list, "stabilization": list,
                "limit_weight": float},
    "optimizer": {"name": str, "iterations": int, "rounds": int, "rho": float, "learning_rate": float,
                  "shooting": str, "segments": int, "multistart": int, "seed": int, "spread": float,
                  "precondition": bool},
    "robust": {"body": str, "extra_masses": list},
    "compare": {"cycloidal": bool},
}
DEFAULTS = {
    "problem": {"stepper": "rk4", "parametrization": "acceleration", "terminal": "constraint",
                "terminal_weight": 1e4, "limit_weight": 1e6},
    "optimizer": {"name": "lbfgs", "iterations": 50, "rounds": 6, "rho": 1e5, "learning_rate": 1e-2,
                  "shooting": "single", "segments": 4, "multistart": 1, "seed": 0, "spread": 0.1,
                  "precondition": False},
    "compare": {"cycloidal": True},
}
DEFAULT_CONFIG = "trajopt_puma_p2p"
LIMIT_MARGIN = 0.01
"""The joint-limit penalty starts this far (rad or m) inside the model's limits."""
REPLAY_SUBSTEPS = 10
"""The open-loop replay of the plan integrates RK4 at dt / REPLAY_SUBSTEPS."""
MAX_STEPS = 100_000
"""Most time steps of a horizon (the optimizer keeps every step's state for the gradient)."""


def load(path=None) -> dict:
    """Read and validate a trajopt config (named errors for missing keys and bad values)."""
    raw, name = read_toml(path, DEFAULT_CONFIG, kind="trajopt")
    cfg = check_tables(raw, name, SCHEMA, DEFAULTS, allow_inf=("problem.tau_limit",))
    if "name" not in cfg.get("robot", {}):
        raise ConfigError(f"{name}: missing robot.name")
    p, o = cfg["problem"], cfg["optimizer"]
    for k in ("T", "dt", "q_final"):
        if k not in p:
            raise ConfigError(f"{name}: missing problem.{k}")
    if p["dt"] <= 0 or p["T"] <= 0 or p["T"] / p["dt"] < 1:
        raise ConfigError(f"{name}: need problem.T >= problem.dt > 0, got T = {p['T']}, dt = {p['dt']}")
    choices = {("problem", "stepper"): ("euler", "rk4", "abm"),
               ("problem", "parametrization"): ("torque", "acceleration"),
               ("problem", "terminal"): ("constraint", "penalty"),
               ("optimizer", "name"): ("lbfgs", "adam"), ("optimizer", "shooting"): ("single", "multiple", "kinematic")}
    for (sec, k), ok in choices.items():
        if cfg[sec][k] not in ok:
            raise ConfigError(f"{name}: {sec}.{k} must be one of {list(ok)}, got {cfg[sec][k]!r}")
    for k in ("iterations", "rounds", "segments", "multistart"):
        if o[k] < 1:
            raise ConfigError(f"{name}: optimizer.{k} must be >= 1, got {o[k]}")
    steps = p["T"] / p["dt"]
    for what, v, top in (("problem.T / problem.dt", steps, MAX_STEPS), ("optimizer.iterations", o["iterations"], 100_000),
                         ("optimizer.rounds", o["rounds"], 1000), ("optimizer.multistart", o["multistart"], 4096),
                         ("optimizer.multistart x steps", o["multistart"] * steps, 10 * MAX_STEPS),
                         ("optimizer.segments", o["segments"], steps)):
        if v > top:
            raise ConfigError(f"{name}: {what} = {v:.6g} is more than {top:.6g}")
    for sec, k in (("optimizer", "rho"), ("optimizer", "learning_rate"), ("problem", "terminal_weight")):
        if not cfg[sec][k] > 0:
            raise ConfigError(f"{name}: {sec}.{k} must be > 0, got {cfg[sec][k]}")
    if not (0 <= p["limit_weight"] < float("inf")):
        raise ConfigError(f"{name}: problem.limit_weight must be >= 0 and finite, got {p['limit_weight']}")
    if o["spread"] < 0 or o["seed"] < 0:
        raise ConfigError(f"{name}: optimizer.spread and optimizer.seed must be >= 0, got {o['spread']}, {o['seed']}")
    if "robust" in cfg and ("body" not in cfg["robust"] or not cfg["robust"].get("extra_masses")):
        raise ConfigError(f"{name}: [robust] needs body and a non-empty list extra_masses")
    return cfg


def _vec(cfg, sec, key, n, default):
    import numpy as np
    v = np.asarray(cfg[sec].get(key, default), float)
    if v.shape != (n,):
        raise ConfigError(f"{cfg['name']}: {sec}.{key} must have {n} entries, got {v.size}")
    return v


def effort(t, q, qd, u):
    """The running cost |u|^2 (minimum effort)."""
    import jax.numpy as jnp
    return jnp.sum(u ** 2)


def effort_in_limits(lo, hi, w, t, q, qd, u):
    """|u|^2 + w |max(q - hi, 0) + max(lo - q, 0)|^2: minimum effort, joint limits as a penalty."""
    import jax.numpy as jnp
    out = jnp.maximum(q - hi, 0.0) + jnp.maximum(lo - q, 0.0)
    return jnp.sum(u ** 2) + w * jnp.sum(out ** 2)


def reach_all(model, qT, qdT, q, qd):
    """Terminal residual (q (-) q_final on the tangent space, qd - qd_final) (2 nv,)."""
    import jax.numpy as jnp

    from ..model.configuration import difference
    return jnp.concatenate([difference(model, qT, q), qd - qdT])


def reach_joints(tj, qT, qdT, q, qd):
    """Terminal residual of the target joints tj: (q[tj] - q_final, qd[tj] - qd_final)."""
    import jax.numpy as jnp
    return jnp.concatenate([q[tj] - qT, qd[tj] - qdT])


def penalty(w, psi, q, qd):
    """Terminal cost w |psi(q, qd)|^2."""
    import jax.numpy as jnp
    return w * jnp.sum(psi(q, qd) ** 2)


def torque_limits(cfg, name, model, nv):
    """(tau_limit (nv,) or None, where it comes from): the config's ``problem.tau_limit``, else
    the model's ``effort_limit`` where any is finite (URDF ``<limit effort>``, MJCF motors)."""
    import numpy as np
    if "tau_limit" in cfg["problem"]:
        lim = _vec(cfg, "problem", "tau_limit", nv, None)
        if not np.all(lim >= 1e-6):
            raise ConfigError(f"{name}: problem.tau_limit must be >= 1e-6 (N m or N; inf: unlimited) per dof (leave "
                              f"it out for the model's effort limits), got {lim.tolist()}")
        return lim, "problem.tau_limit"
    eff = np.asarray(model.effort_limit, float)
    if np.isfinite(eff).any():
        return eff, "the model's effort limits"
    return None, "none (the config sets no problem.tau_limit and the model has no effort limits)"


NO_POSITION_LIMITS = "joint limits: none (the model's position limits are infinite)"
"""The summary line of a run whose model has no finite position limit."""


def has_position_limits(model) -> bool:
    """True when some joint of ``model`` has a finite q_lower or q_upper."""
    import numpy as np
    return bool(np.isfinite(np.asarray(model.q_lower)).any() or np.isfinite(np.asarray(model.q_upper)).any())


def limit_report(model, Q):
    """Lines naming joints whose positions leave [q_lower, q_upper] in Q (steps + 1, nq)."""
    import numpy as np
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    lines = []
    for j in range(Q.shape[1]):
        below, above = Q[:, j] < lo[j] - 1e-9, Q[:, j] > hi[j] + 1e-9
        if below.any() or above.any():
            k = int(np.argmax(below | above))
            lines.append(f"q[{j}] leaves its limits [{lo[j]:.4g}, {hi[j]:.4g}] at sample {k} (q = {Q[k, j]:.4g})")
    return lines


def run(args) -> int:
    """``jaxdyn trajopt``: load the config, build the problem, optimize, write the outputs.
    Returns the exit status (0); bad input raises ConfigError (exit 2 in :func:`jaxdyn.cli.main`)."""
    cfg, out, built = common.start(args, load)
    import jax
    import numpy as np

    import jaxdyn
    from ..io.named import start_configuration
    from ..model.configuration import normalized_or_raise
    from . import trajopt as to

    name = cfg["name"]
    closed, q_closed = built if isinstance(built, tuple) else (None, None)
    model = closed.model if closed is not None else built
    p, o = cfg["problem"], cfg["optimizer"]
    nq, nv = model.nq, model.nv
    q_default = q_closed if closed is not None else start_configuration(cfg["robot"]["name"], model)
    q0 = _vec(cfg, "problem", "q0", nq, q_default)
    qd0 = _vec(cfg, "problem", "qd0", nv, np.zeros(nv))
    tj = np.asarray(p.get("target_joints", np.arange(nv)), float)
    if tj.size == 0 or np.any(tj != np.round(tj)) or np.any(tj < 0) or np.any(tj >= nv) or nq != nv and "target_joints" in p:
        raise ConfigError(f"{name}: problem.target_joints must be distinct dof indices in [0, {nv}) "
                          f"(vector-space joints), got {tj.tolist()}")
    tj = np.unique(tj.astype(int))
    full = "target_joints" not in p
    qT = _vec(cfg, "problem", "q_final", nq if full else tj.size, None)
    q0 = normalized_or_raise(model, q0, f"{name}: problem.q0")[0]
    if full:
        qT = normalized_or_raise(model, qT, f"{name}: problem.q_final")[0]
    qdT = _vec(cfg, "problem", "qd_final", nv if full else tj.size, np.zeros(nv if full else tj.size))
    act = _vec(cfg, "problem", "actuated", nv, np.ones(nv)) if "actuated" in p else None
    if act is not None and (not np.all((act == 0) | (act == 1)) or not act.any()):
        raise ConfigError(f"{name}: problem.actuated must be 0 or 1 per dof with at least one 1, got {act.tolist()}")
    stab = p.get("stabilization")
    if stab is not None and (closed is None or len(stab) != 2 or min(stab) < 0):
        raise ConfigError(f"{name}: problem.stabilization needs a closed mechanism and [alpha, beta] >= 0")
    if closed is not None:
        q0, qd0 = (np.asarray(x) for x in jaxdyn.project_constraints(closed, q0, qd0))
        jaxdyn.constraints.check_assembled(closed, q0, f"{name}: problem.q0")
    common.require_stable_step(closed if closed is not None else model, q0, p["dt"], p["stepper"],
                               f"{name}: problem.dt")
    lim, lim_from = torque_limits(cfg, name, model, nv)
    steps = int(round(p["T"] / p["dt"]))
    dt = p["dt"]
    Partial = jax.tree_util.Partial
    if full:
        psi = Partial(reach_all, model, np.asarray(qT), np.asarray(qdT))
    else:
        psi = Partial(reach_joints, np.asarray(tj), np.asarray(qT), np.asarray(qdT))
    if p["terminal"] == "constraint":
        term, cons = None, psi
    else:
        term, cons = Partial(penalty, np.asarray(p["terminal_weight"], float), psi), None
    robust = "robust" in cfg
    lo, hi = np.asarray(model.q_lower, float), np.asarray(model.q_upper, float)
    limited = has_position_limits(model)
    if limited and p["limit_weight"] > 0:
        mg = np.minimum(LIMIT_MARGIN, (hi - lo) / 4)
        run_cost = Partial(effort_in_limits, np.clip(lo + mg, -1e6, 1e6), np.clip(hi - mg, -1e6, 1e6),
                           np.asarray(p["limit_weight"], float))
    else:
        run_cost = Partial(effort)
    prob = to.problem(closed if closed is not None else model, q0, qd0, dt, steps, run_cost, term, tau_limit=lim,
                      stepper=p["stepper"], parametrization=p["parametrization"], terminal_constraint=cons,
                      actuation=act, stabilization=stab)
    if robust:
        import dataclasses
        from ..errors import ArgumentError
        try:
            variants = to.payload_variants(model, cfg["robust"]["body"], cfg["robust"]["extra_masses"])
        except ArgumentError as e:
            raise ConfigError(f"{name}: robust.body: {e}") from None
        prob = dataclasses.replace(prob, model=variants)
    K = o["multistart"]
    Z0 = np.zeros((steps, nv))               # host arrays here and below: no device op of their own
    if K > 1:
        Z0 = o["spread"] * np.asarray(jax.random.normal(jax.random.PRNGKey(o["seed"]), (K, steps, nv)))
        Z0[0] = 0.0
    print(f"jaxdyn trajopt {name}: robot {model.name}, {steps} steps of {dt} s, {p['parametrization']} "
          f"parametrization, {o['shooting']} shooting, {o['name']}, multistart {K}"
          + (f", robust over {len(cfg['robust']['extra_masses'])} payloads" if robust else ""), file=sys.stderr)
    kw = dict(shooting=o["shooting"], optimizer=o["name"], iterations=o["iterations"], rounds=o["rounds"],
              rho=o["rho"], learning_rate=o["learning_rate"], segments=o["segments"], robust=robust,
              precondition=o["precondition"])
    t_wall = time.time()
    print("compiling ...", file=sys.stderr)
    total = (o["rounds"] if cons is not None or o["shooting"] == "multiple" else 1) * o["iterations"]
    from ..output import progress_bar, wall_time_line

    rounds_done = []

    def progress(r, i):
        rounds_done.append(time.time())
        progress_bar(min(int(r) * o["iterations"] + int(i) + 1, total), total, t_wall)

    res = to.optimize(prob, Z0, progress=progress, **kw)
    jax.block_until_ready(res.U)
    best = int(np.argmin(np.asarray(res.cost) + 1e12 * (np.asarray(res.defect) > 1e-2))) if K > 1 else None
    pick = (lambda x: x[best]) if K > 1 else (lambda x: x)
    tr = jax.tree_util.tree_map(pick, res.trajectory)
    U, hist = np.asarray(pick(res.U)), np.asarray(pick(res.history))
    if not bool(tr.ok):
        from ..errors import SimulationError
        k, t_bad, what = jaxdyn.first_nonfinite(model, tr)
        why = common.why_nonfinite(closed if closed is not None else model, tr.q, k, dt, p["stepper"])
        raise SimulationError(f"{name}: the optimized rollout is non-finite from t = {t_bad:.6g} s (sample {k}): "
                              f"{what}; {why}")
    Q, V = np.asarray(tr.q), np.asarray(tr.qd)
    J = float(to.effort(U, dt))

    def miss(q, qd):
        """(max |q - q_final|, max |qd - qd_final|) of a final state."""
        r = np.abs(np.asarray(jax.jit(psi)(q, qd)))
        return float(r[:r.size - len(qdT)].max()), float(r[r.size - len(qdT):].max())

    err_q, err_v = miss(Q[-1], V[-1])
    rep = jax.device_get(to.replay(prob, U, REPLAY_SUBSTEPS, model=closed if closed is not None else model))
    rep_q, rep_v = miss(rep.q[-1], rep.qd[-1])
    wall = time.time() - t_wall
    from ..io.named import absolute_name
    lines = [f"config: {name}", f"robot: {model.name} (nq={nq}, nv={nv})",
             f"robot source: {absolute_name(cfg['robot']['name'])}",
             f"horizon: T = {steps * dt:g} s, {steps} steps, dt = {dt:g} s, stepper {p['stepper']}",
             f"optimizer: {o['name']}, {o['shooting']} shooting, {len(hist)} iterations, multistart {K}"
             + (f" (best start {best})" if K > 1 else ""),
             wall_time_line(wall, getattr(args, "started", None), "optimize + replay")
             + (f"; first round (compiles) {rounds_done[0] - t_wall:.1f} s, later rounds "
                f"{(rounds_done[-1] - rounds_done[0]) / (len(rounds_done) - 1):.2f} s each"
                if len(rounds_done) > 1 else ""),
             f"effort sum |tau|^2 dt: {J:.6g}",
             f"terminal error ({'optimizer model' if o['shooting'] != 'kinematic' else 'rollout of the restored plan'}: "
             f"{p['stepper']} at dt = {dt:g} s): max |q - q_final| = {err_q:.3g}, "
             f"max |qd - qd_final| = {err_v:.3g}",
             f"terminal error replayed open-loop (torques of trajectory.csv held per sample, rk4 at dt = "
             f"{dt / REPLAY_SUBSTEPS:g} s): max |q - q_final| = {rep_q:.3g}, max |qd - qd_final| = {rep_v:.3g}",
             f"max |tau|: {np.abs(U).max(0).round(4).tolist()}"]
    warn = []
    if max(err_q, err_v) > 1e-3:
        warn.append(f"the optimized trajectory misses the target by {max(err_q, err_v):.3g} (> 1e-3): not converged; "
                    "try more optimizer.rounds or iterations, a longer horizon or a looser tau_limit")
    if max(rep_q, rep_v) > 1e-2 and max(err_q, err_v) <= 1e-2:
        warn.append(f"the plan replayed open-loop on rk4 at dt / {REPLAY_SUBSTEPS} misses the target by "
                    f"{max(rep_q, rep_v):.3g} (> 1e-2) while the optimizer's model reaches it: that model "
                    f"(problem.stepper = {p['stepper']!r}, dt = {dt:g}) is too coarse; use 'rk4' or a smaller dt")
    for w in warn:
        lines.append(f"warning: {w}")
        print(f"warning: {w}", file=sys.stderr)
    cyc = None
    if closed is not None:
        drift = np.asarray(jax.vmap(lambda q: jaxdyn.constraint_residual(closed, q))(Q))
        lines.append(f"constraint drift: max |residual| = {np.abs(drift).max():.3g}")
    if cfg["compare"]["cycloidal"] and nq == nv and closed is None and full:
        # the torques computed torque applies on the cycloid, tracked from its start: RNEA along it
        path = jax.vmap(jaxdyn.integrators.cycloidal(q0, qT, steps * dt))
        cyc = np.asarray(jax.jit(lambda ts: jax.vmap(jaxdyn.rnea, (None, 0, 0, 0))(model, *path(ts)))(
            dt * np.arange(steps)))
        Jc = float(to.effort(cyc, dt))
        lines.append(f"cycloidal (Saha eq. 18, inverse dynamics along it): effort {Jc:.6g}; "
                     f"optimized / cycloidal = {J / Jc:.3f}")
    lim_lines = limit_report(model, Q)
    if not limited:
        lines.append(NO_POSITION_LIMITS)
    else:
        how = (f"penalized in the cost, limit_weight {p['limit_weight']:g}" if p["limit_weight"] > 0
               else "not in the cost (limit_weight 0)")
        lines += [f"joint limits ({how}): {x}" for x in lim_lines] or [f"joint limits ({how}): respected"]
    for x in lim_lines:
        print(f"warning: {x}", file=sys.stderr)
    if lim is None:
        lines.append(f"torque limits: {lim_from}")
    else:
        lines.append(f"torque limits ({lim_from}): {np.round(lim, 4).tolist()}")
    from ..output import dof_labels
    target = np.full(nq, np.nan)
    target[np.arange(nq) if full else tj] = qT
    from ..io.named import model_file
    objective = ("objective of the kinematic transcription\n(augmented Lagrangian)" if o["shooting"] == "kinematic"
                 else "objective (augmented Lagrangian)")
    _write(out, f"{name} ({model.name})", dt, Q, V, U, hist, cyc, lines, dof_labels(model), target,
           closed if closed is not None else model, model_file(cfg["robot"]["name"]), objective)
    print("\n".join(lines))
    return 0


def _write(out, name, dt, Q, V, U, hist, cyc, lines, labels, target, model, visuals=None,
           objective="objective (augmented Lagrangian)"):
    import numpy as np

    from ..output import PLOTS_SKIPPED, plot_columns, plot_curve, position_columns, write_trajectory_csv
    from ..viewer import animate
    os.makedirs(out, exist_ok=True)
    t = np.arange(Q.shape[0]) * dt
    Uf = np.vstack([U, U[-1:]])
    write_trajectory_csv(os.path.join(out, "trajectory.csv"), t, Q, V, Uf)
    animate(model, Q, os.path.join(out, "animation.html"), t=t, title=f"{name}: optimized trajectory",
            visuals=visuals)
    plotted = plot_curve(os.path.join(out, "cost.png"), f"{name}: cost curve", hist, "iteration", objective)
    tree = getattr(model, "model", model)     # a ClosedModel's tree
    qs, ql = position_columns(tree, Q)
    plot_columns(os.path.join(out, "joints.png"), f"{name}: joint positions", t, qs,
                 lambda j: f"{ql[j][0]} ({ql[j][1]})", label="optimized", marks=position_columns(tree, target[None])[0][0])
    plot_columns(os.path.join(out, "torques.png"), f"{name}: joint torques (held per sample)", t, Uf,
                 lambda j: f"{labels[j][0]} ({labels[j][3]})", label="optimized", other=cyc,
                 other_label="cycloidal", other_t=t[:-1])
    with open(os.path.join(out, "summary.txt"), "w") as fh:
        fh.write("\n".join(lines + (["files: trajectory.csv, animation.html, cost.png, joints.png, torques.png, "
                                      "summary.txt"] if plotted else
                                     [PLOTS_SKIPPED, "files: trajectory.csv, animation.html, summary.txt"])) + "\n")
