"""Trajectory optimization: the cost of solving a problem again for new data.

Usage: python benchmarks/bench_trajopt.py [--targets 5] [--starts 8]
         [--out benchmarks/results/trajopt.json]

The problem is the default ``jaxdyn trajopt`` config (``trajopt_puma_p2p``): the PUMA from rest
at q = 0 to a target at rest in T = 2 s, 100 RK4 steps, acceleration parametrization, minimum
effort, terminal state as an augmented-Lagrangian constraint, preconditioned L-BFGS.  Two
solvers on the same targets in one run: the config's (``shooting = "kinematic"``, 2 rounds x
100 steps on the kinematic transcription, then Gauss-Newton steps on the held-torque RK4
rollouts) and single shooting through the RK4 rollouts (2 rounds x 50 steps).
Timed in one process per solver (wall seconds, results blocked on):

* ``first``: the first solve (compiles the four programs of :func:`optimize`);
* ``same``: the same problem again;
* ``new_target_i``: a new random target (|q_T| <= 0.6 rad) and a new random start, the same
  structure (targets are a ``Partial``'s data, q0 is data): no compile;
* ``multistart``: K starts of the default target in one call (first call and again).

Each solve's plan is replayed open-loop on RK4 at dt / 10 (``trajopt.replay``) and its
terminal error and effort are recorded.  Writes JSON and a PNG plot.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


SOLVERS = {"kinematic": dict(shooting="kinematic", iterations=100, rounds=2, rho=1e5, precondition=True),
           "single": dict(shooting="single", iterations=50, rounds=2, rho=1e5, precondition=True)}
"""The two solvers compared ("kinematic": the default config's optimizer table)."""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", type=int, default=5)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--solver", choices=sorted(SOLVERS), help="run one solver (in this process)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "trajopt.json"))
    args = ap.parse_args()
    if args.solver is None:                    # each solver in a fresh process: its first solve compiles
        import subprocess
        import sys
        import tempfile
        rows, summary = [], {}
        with tempfile.TemporaryDirectory() as tmp:
            for name in SOLVERS:
                part = os.path.join(tmp, name + ".json")
                subprocess.run([sys.executable, __file__, "--solver", name, "--targets", str(args.targets),
                                "--starts", str(args.starts), "--out", part], check=True)
                with open(part) as fh:
                    got = json.load(fh)
                rows += got["rows"]
                summary[name] = got["summary"]
        print(json.dumps(summary, indent=1))
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump({"machine": platform.platform(), "jax": got["jax"], "solvers": SOLVERS, "rows": rows,
                       "summary": summary}, fh, indent=1)
        plot(rows, args.out.replace(".json", ".png"))
        return

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import jaxdyn
    from jaxdyn.apps import trajopt as to
    from jaxdyn.apps.trajopt_cli import effort, load, reach_all

    o = load()["optimizer"]
    assert {k: o[k] for k in SOLVERS["kinematic"]} == SOLVERS["kinematic"], "SOLVERS['kinematic'] is the config's"
    m = jaxdyn.robots.puma560()
    P = jax.tree_util.Partial
    kw = SOLVERS[args.solver]

    def problem(q0, qT):
        return to.problem(m, jnp.asarray(q0), jnp.zeros(6), 0.02, 100, P(effort),
                          terminal_constraint=P(reach_all, m, jnp.asarray(qT), jnp.zeros(6)), stepper="rk4",
                          parametrization="acceleration")

    def solve(q0, qT, Z0=None):
        prob = problem(q0, qT)
        t = time.perf_counter()
        res = to.optimize(prob, Z0, **kw)
        jax.block_until_ready(res.U)
        wall = time.perf_counter() - t
        U = res.U if res.U.ndim == 2 else res.U[int(np.argmin(np.asarray(res.cost)))]
        fin = to.replay(prob, U)
        err = max(float(jnp.abs(fin.q[-1] - jnp.asarray(qT)).max()), float(jnp.abs(fin.qd[-1]).max()))
        print(f"{args.solver} {wall:8.2f} s   replay error {err:.2e}", flush=True)
        return wall, err, float(np.min(np.asarray(res.cost)))

    rows = []
    q0, qT = np.zeros(6), np.array([0.5, -0.5, 0.5, 0.3, 0.3, 0.3])
    for case in ("first", "same"):
        w, e, J = solve(q0, qT)
        rows.append({"solver": args.solver, "case": case, "wall_s": w, "replay_error": e, "effort": J})
    rng = np.random.default_rng(0)
    for i in range(args.targets):
        w, e, J = solve(rng.uniform(-0.2, 0.2, 6), rng.uniform(-0.6, 0.6, 6))
        rows.append({"solver": args.solver, "case": f"new_target_{i}", "wall_s": w, "replay_error": e, "effort": J})
    Z0 = 0.1 * jnp.asarray(rng.normal(size=(args.starts, 100, 6)))
    for case in ("multistart_first", "multistart_again"):
        w, e, J = solve(q0, qT, Z0)
        rows.append({"solver": args.solver, "case": f"{case} (K={args.starts})", "wall_s": w, "replay_error": e,
                     "effort": J})
    for r in rows:
        print(f"{r['solver']:10s} {r['case']:28s} {r['wall_s']:8.2f} s   replay error {r['replay_error']:.2e}   "
              f"effort {r['effort']:.1f}")
    first = rows[0]["wall_s"]
    new = [r["wall_s"] for r in rows if r["case"].startswith("new_target")]
    summary = {"first_s": first, "new_target_median_s": float(np.median(new)),
               "new_target_fraction_of_first": float(np.median(new) / first),
               "new_target_efforts": [r["effort"] for r in rows if r["case"].startswith("new_target")]}
    print(summary)
    with open(args.out, "w") as fh:
        json.dump({"jax": jax.__version__, "rows": rows, "summary": summary}, fh, indent=1)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 5.5))
    names = [f"{r['solver']}: {r['case']}" for r in rows]
    colors = [("C3" if "first" in r["case"] else "C0") if r["solver"] == "kinematic" else
              ("C1" if "first" in r["case"] else "C7") for r in rows]
    ax.barh(names, [r["wall_s"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["wall_s"], i, f" {r['wall_s']:.2f} s, effort {r['effort']:.0f}, replay {r['replay_error']:.0e} rad",
                va="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("wall time per solve [s], log scale (first includes compiling)")
    ax.set_title("jaxdyn trajopt, PUMA point-to-point, 100 RK4 steps: kinematic transcription vs single shooting",
                 fontsize=9)
    ax.set_xlim(0.1, 30 * max(r["wall_s"] for r in rows))
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
