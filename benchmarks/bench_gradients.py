"""Reverse-mode cost: what trajectory optimization and identification differentiate.

* ``rollout``: ms per call of a 200-step RK4 rollout (dt 10 ms, held torques, one trajectory)
  and of ``jax.jit(jax.value_and_grad(loss))`` of it with respect to the torques (the loss
  the final state's squared norm plus the effort);
* ``aba``: µs per state of ``jax.jit(jax.vmap(aba))`` and of ``jax.jit(jax.vmap(jax.grad(
  w . aba(q, qd, tau))))`` with respect to (q, qd, tau), at B = 1024.

With ``--before DIR`` an earlier checkout runs the same cases in the same run.  Each version
runs in its own worker processes (``--rounds`` of them, alternating between the versions);
a time is the least of the workers' medians.  Every process is pinned to core 0.

Usage: python benchmarks/bench_gradients.py [--before /path/to/old/checkout] [--rounds 2]
         [--robots panda,anymal_c,talos_reduced] [--out benchmarks/results/gradients.json]
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from bench_engine import median_time, pin_model, states  # noqa: E402  (benchmarks/ is on sys.path)
from timing import alternate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, DT, B = 200, 0.01, 1024


def worker(args):
    """Times of one jaxdyn version (the one importable here): {case: ms or µs}."""
    import warnings
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxdyn
    warnings.simplefilter("ignore")
    out = {}
    for name in args.robots.split(","):
        path, fb, pm = pin_model(name)
        m = jaxdyn.load_urdf(path, floating_base=fb)
        Q, V, T = (jnp.asarray(x) for x in states(pm, B))
        U = 0.1 * T[:STEPS]

        def loss(m, U):
            tr = jaxdyn.rollout(m, Q[0], jnp.zeros(m.nv), U, DT, STEPS, stepper="rk4")
            return jnp.sum(tr.q[-1] ** 2) + jnp.sum(tr.qd[-1] ** 2) + DT * jnp.sum(U ** 2)
        for case, f in (("primal", jax.jit(loss)), ("value_and_grad", jax.jit(jax.value_and_grad(loss, 1)))):
            out[f"{name}/rollout/{case}"] = median_time(lambda: jax.block_until_ready(f(m, U))) * 1e3
        w = jnp.linspace(-1.0, 1.0, m.nv)
        grad = jax.grad(lambda q, v, t: jnp.dot(w, jaxdyn.aba(m, q, v, t)), (0, 1, 2))
        for case, f in (("vmap", jax.jit(jax.vmap(lambda q, v, t: jaxdyn.aba(m, q, v, t)))),
                        ("vmap_grad", jax.jit(jax.vmap(grad)))):
            out[f"{name}/aba/{case}"] = median_time(lambda: jax.block_until_ready(f(Q, V, T))) / B * 1e6
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gradients.json"))
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    os.sched_setaffinity(0, {0})
    res = alternate(__file__, ["--robots", args.robots], args.before, args.rounds)
    import jax
    meta = dict(steps=STEPS, dt=DT, batch=B, rounds=args.rounds, jax=jax.__version__, before=args.before,
                units="rollout rows: ms per call; aba rows: µs per state")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(meta=meta, results=res), fh, indent=1)
    for k in sorted(res["after"]):
        print(f"{k:36s}" + " ".join(f"{res[v].get(k, float('nan')):9.2f}" for v in res))
    plot(res, args.out.replace(".json", ".png"))
    print("wrote", args.out)


def plot(res, path):
    """Two panels (rollout ms per call, aba µs per state): per robot and case, one bar per version."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, kind, unit in zip(axes, ("rollout", "aba"), ("ms per call", "µs per state")):
        keys = sorted(k for k in res["after"] if f"/{kind}/" in k)
        x = np.arange(len(keys))
        wd = 0.8 / len(res)
        for i, v in enumerate(res):
            ax.bar(x + (i - (len(res) - 1) / 2) * wd, [res[v].get(k, np.nan) for k in keys], wd, label=v)
        ax.set_xticks(x, [k.replace(f"/{kind}/", "\n") for k in keys], fontsize=7)
        ax.set_ylabel(unit)
        ax.set_title({"rollout": f"{STEPS}-step RK4 rollout: loss, loss + gradient",
                      "aba": f"aba and its gradient, vmap over B = {B}"}[kind], fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
