"""Cost of an eager ``jaxdyn.rollout`` call, first and repeated, per stepper.

Usage: python benchmarks/bench_rollout.py [--robots planar3,puma560] [--steps 40]
         [--out benchmarks/results/rollout.json]

For each robot and stepper, wall seconds of (a) the first call and (b) a second call with
other q0, dt and torques, with the controls given two ways:

* ``held``: a (steps, nv) torque array (no Python function in the rollout: one compiled
  program per structure, steps and options, reused by the second call);
* ``function``: a controller function ``ctrl(t, q, qd)`` returning a constant torque (the
  array's first row; what is timed is the tracing, not the torques), which ``rollout``
  traces on every call (it may read Python state that changed).

Each first call is made in a fresh compilation cache (``jax.clear_caches()``).  Writes JSON
and a PNG plot.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STEPPERS = ("euler", "rk4", "rkf45", "abm")


def _wall(fn):
    import jax
    t0 = time.perf_counter()
    jax.block_until_ready(fn().q)
    return time.perf_counter() - t0


def run(robots, steps):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jaxdyn
    rows = []
    for name in robots:
        model = getattr(jaxdyn.robots, name)()
        rng = np.random.default_rng(0)
        U = rng.normal(size=(2, steps, model.nv))
        q0 = 0.1 * rng.normal(size=(2, model.nq))
        for stepper in STEPPERS:
            for kind in ("held", "function"):
                def call(i):
                    u = U[i]
                    ctrl = u if kind == "held" else (lambda t, q, qd: jax.numpy.asarray(u[0]))
                    return jaxdyn.rollout(model, q0[i], np.zeros(model.nv), ctrl, dt=0.01 / (i + 1),
                                          steps=steps, stepper=stepper)
                jax.clear_caches()
                first = _wall(lambda: call(0))
                second = _wall(lambda: call(1))
                rows.append({"robot": name, "stepper": stepper, "controls": kind, "steps": steps,
                             "first_call_s": first, "second_call_s": second})
                print(f"{name:10s} {stepper:6s} {kind:9s} first {first:7.3f} s   second {second:7.3f} s", flush=True)
    return rows


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    robots = sorted({r["robot"] for r in rows})
    fig, axes = plt.subplots(1, len(robots), figsize=(5 * len(robots), 3.5), squeeze=False)
    for ax, name in zip(axes[0], robots):
        x = np.arange(len(STEPPERS))
        for j, (kind, call) in enumerate([(k, c) for k in ("held", "function") for c in ("first", "second")]):
            y = [next(r[f"{call}_call_s"] for r in rows if r["robot"] == name and r["stepper"] == s
                      and r["controls"] == kind) for s in STEPPERS]
            ax.bar(x + (j - 1.5) * 0.2, y, 0.2, label=f"{kind}, {call} call")
        ax.set_xticks(x, STEPPERS)
        ax.set_yscale("log")
        ax.set_ylabel("wall s per eager rollout call")
        ax.set_title(name)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", default="planar3,puma560")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "rollout.json"))
    args = ap.parse_args()
    import jax
    rows = run([r for r in args.robots.split(",") if r], args.steps)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "jax": jax.__version__}
    with open(args.out, "w") as f:
        json.dump({"machine": machine, "rows": rows}, f, indent=1)
    plot(rows, os.path.splitext(args.out)[0] + ".png")


if __name__ == "__main__":
    main()
