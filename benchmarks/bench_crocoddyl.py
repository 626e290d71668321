"""Trajectory optimization side by side with crocoddyl: one UR5 reach, both solvers.

Usage (crocoddyl is a benchmark-only dependency in its own environment: pin 3.8 and
crocoddyl 3.1 install together, the pin 4.1 / crocoddyl 3.2.1 wheels crash in
``SolverFDDP.solve``)::

    python -m venv /tmp/croc && /tmp/croc/bin/pip install pin==3.8.0 crocoddyl==3.1.0 \\
        "cmeel-urdfdom<5" "cmeel-tinyxml2<11"
    python benchmarks/bench_crocoddyl.py --croc-python /tmp/croc/bin/python [--starts 64]
        [--out benchmarks/results/crocoddyl.json]

The problem, identical on both sides: example-robot-data's UR5 URDF, from rest at ``Q0`` to
rest at ``QT``, ``STEPS`` samples of ``DT`` (torques held over each sample, RK4 per sample),
no torque limits, cost

    J = sum_k dt * 0.5 W_U |u_k|^2  +  0.5 W_T (|q_N - q_T|^2 + |qd_N|^2)

(crocoddyl's convention: a quadratic residual cost 0.5 w |r|^2, running costs times dt).
crocoddyl: ``DifferentialActionModelFreeFwdDynamics`` + ``IntegratedActionModelRK`` (RK4),
``SolverFDDP`` from the quasi-static torques at q0, at most ``--croc-iters`` iterations.
jaxdyn: :func:`jaxdyn.apps.trajopt.optimize`, single shooting, acceleration parametrization,
L-BFGS (one round: no constraint), the same J as its running / terminal cost: ``--iterations``
steps (first call, compiling, and again), 3x as many steps, and K = ``--starts`` random starts
of ``--iterations`` steps in one vmapped call.

Every plan (a torque sequence) is evaluated by jaxdyn: its J on an RK4 rollout at dt (the
optimizers' model; for crocoddyl's plan this equals crocoddyl's own cost, a check that both
sides solve one problem), its terminal error max(|q_N - q_T|, |qd_N|) there, and in an
open-loop replay on RK4 at dt / 10.  Writes JSON and a
PNG; the crocoddyl half runs in ``--croc-python`` (``--croc-side``) and prints JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
Q0 = [0.0, -1.5, 1.5, 0.0, 0.0, 0.0]
QT = [0.9, -0.8, 0.6, -0.7, 0.5, 0.4]
DT, STEPS = 0.02, 100
W_U, W_T = 1.0, 1e5


def croc_side(urdf, iters):
    """The crocoddyl solve (run in the crocoddyl environment): JSON on stdout."""
    import crocoddyl
    import pinocchio as pin
    model = pin.buildModelFromUrdf(urdf)
    state = crocoddyl.StateMultibody(model)
    act = crocoddyl.ActuationModelFull(state)
    xT = np.concatenate([QT, np.zeros(model.nv)])
    x0 = np.concatenate([Q0, np.zeros(model.nv)])

    def costs(terminal):
        c = crocoddyl.CostModelSum(state, act.nu)
        if terminal:
            c.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelState(state, xT, act.nu)), W_T)
        else:
            c.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, act.nu)), W_U)
        return c

    def stage(terminal):
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, costs(terminal))
        return crocoddyl.IntegratedActionModelRK(dam, crocoddyl.RKType.four, 0.0 if terminal else DT)

    prob = crocoddyl.ShootingProblem(x0, [stage(False)] * STEPS, stage(True))
    solver = crocoddyl.SolverFDDP(prob)
    t = time.perf_counter()
    xs = [x0] * (STEPS + 1)
    us = prob.quasiStatic([x0] * STEPS)
    solver.solve(xs, us, iters, False)
    wall = time.perf_counter() - t
    print(json.dumps({"U": np.asarray(solver.us).tolist(), "cost": solver.cost, "iterations": solver.iter,
                      "wall_s": wall, "crocoddyl": crocoddyl.__version__, "pinocchio": pin.__version__,
                      "stop": solver.stop}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--croc-python", required=False, help="python of an environment with crocoddyl")
    ap.add_argument("--croc-side", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--croc-iters", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=300, help="jaxdyn L-BFGS steps")
    ap.add_argument("--starts", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "crocoddyl.json"))
    args = ap.parse_args()
    if args.croc_side:
        return croc_side(args.croc_side, args.croc_iters)
    if not args.croc_python:
        ap.error("--croc-python is required (an interpreter with crocoddyl; see the module docstring)")

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import jaxdyn
    from jaxdyn.apps import trajopt as to
    from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir

    urdf = os.path.join(example_robot_data_dir(), ERD_URDFS["ur5"])
    r = subprocess.run([args.croc_python, os.path.abspath(__file__), "--croc-side", urdf, "--croc-iters",
                        str(args.croc_iters)], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"crocoddyl side failed:\n{r.stderr[-3000:]}")
    croc = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"crocoddyl {croc['crocoddyl']} (pinocchio {croc['pinocchio']}): cost {croc['cost']:.6g}, "
          f"{croc['iterations']} iterations, {croc['wall_s']:.3f} s", flush=True)

    m = jaxdyn.load_urdf(urdf)
    P = jax.tree_util.Partial
    prob = to.problem(m, jnp.asarray(Q0), jnp.zeros(6), DT, STEPS, P(running_cost),
                      terminal_cost=P(terminal_cost, jnp.asarray(QT)), stepper="rk4",
                      parametrization="acceleration")

    def evaluate(U):
        """J of a torque plan on RK4 at dt (both plans by one yardstick), its terminal error
        there (the optimizers' model) and in the accurate replay (RK4 at dt / 10)."""
        U = jnp.asarray(U)
        tr = jaxdyn.rollout(m, prob.q0, prob.qd0, U, DT, STEPS, stepper="rk4")
        fin = to.replay(prob, U)
        err = lambda q, qd: max(float(jnp.abs(q - jnp.asarray(QT)).max()), float(jnp.abs(qd).max()))  # noqa: E731
        return {"cost": float(0.5 * W_U * jnp.sum(U ** 2) * DT + terminal_cost(jnp.asarray(QT), tr.q[-1], tr.qd[-1])),
                "model_error": err(tr.q[-1], tr.qd[-1]), "replay_error": err(fin.q[-1], fin.qd[-1])}

    rows = [{"solver": "crocoddyl FDDP", "case": "solve", "wall_s": croc["wall_s"], "iterations": croc["iterations"],
             "cost_own": croc["cost"], **evaluate(croc["U"])}]

    def solve(case, iterations, Z0=None):
        t = time.perf_counter()
        res = to.optimize(prob, Z0, iterations=iterations)
        jax.block_until_ready(res.U)
        wall = time.perf_counter() - t
        best = int(np.argmin(np.asarray(res.cost))) if Z0 is not None else None
        U, J = (res.U, res.cost) if best is None else (res.U[best], res.cost[best])
        row = {"solver": "jaxdyn L-BFGS", "case": case, "wall_s": wall, "iterations": iterations,
               "cost_own": float(J), **evaluate(U)}
        if best is not None:
            row["cost_spread"] = [float(np.min(res.cost)), float(np.median(res.cost)), float(np.max(res.cost))]
        rows.append(row)
        print(row, flush=True)

    it = args.iterations
    solve(f"{it} steps, first (compiles)", it)
    solve(f"{it} steps, again", it)
    solve(f"{3 * it} steps, first (compiles)", 3 * it)
    Z0 = 0.5 * jnp.asarray(np.random.default_rng(0).normal(size=(args.starts, STEPS, 6)))
    solve(f"K={args.starts} starts x {it} steps, one call (compiles)", it, Z0)
    print("\n| solver | case | wall s | iterations | J (own) | J (jaxdyn RK4 at dt) | terminal error at dt | "
          "replay error (RK4 dt/10) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['solver']} | {r['case']} | {r['wall_s']:.3f} | {r['iterations']} | {r['cost_own']:.6g} | "
              f"{r['cost']:.6g} | {r['model_error']:.2e} | {r['replay_error']:.2e} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": platform.platform(), "jax": jax.__version__, "crocoddyl": croc["crocoddyl"],
                   "pinocchio_croc": croc["pinocchio"], "problem": {"q0": Q0, "qT": QT, "dt": DT, "steps": STEPS,
                                                                    "w_u": W_U, "w_T": W_T}, "rows": rows},
                  fh, indent=1)
    plot(rows, args.out.replace(".json", ".png"))


def running_cost(t, q, qd, u):
    """0.5 W_U |u|^2 (integrated by the rectangle rule: times dt)."""
    return 0.5 * W_U * (u @ u)


def terminal_cost(qT, q, qd):
    """0.5 W_T (|q - q_T|^2 + |qd|^2)."""
    e = q - qT
    return 0.5 * W_T * ((e @ e) + (qd @ qd))


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axs = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    names = [f"{r['solver']}\n{r['case']}" for r in rows]
    colors = ["C1" if r["solver"].startswith("croc") else ("C3" if "compiles" in r["case"] else "C0") for r in rows]
    axs[0].barh(names, [r["wall_s"] for r in rows], color=colors)
    axs[0].set_xscale("log")
    axs[0].set_xlabel("wall time per solve (s, log)")
    for i, r in enumerate(rows):
        axs[0].text(r["wall_s"], i, f" {r['wall_s']:.2g} s", va="center", fontsize=8)
    axs[0].invert_yaxis()
    axs[1].barh(names, [r["cost"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        axs[1].text(r["cost"], i, f" J {r['cost']:.4g}, replay {r['replay_error']:.1e} rad", va="center", fontsize=8)
    axs[1].set_xlabel("cost J of the plan (jaxdyn RK4 at dt)")
    axs[1].set_xlim(0, 1.6 * max(r["cost"] for r in rows))
    axs[1].invert_yaxis()
    axs[1].set_yticks([])
    fig.suptitle(f"UR5 reach, {STEPS} RK4 samples of {DT} s, minimum effort + terminal penalty: crocoddyl vs jaxdyn")
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
