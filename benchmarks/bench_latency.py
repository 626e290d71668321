"""One-state latency: µs per call of jaxdyn's public functions on one state (B = 1), with JAX's
CPU dispatch asynchronous (JAX's default) and synchronous, vs Pinocchio per call.

Usage: python benchmarks/bench_latency.py [--robots panda,talos_reduced] [--calls 3000]
         [--out benchmarks/results/latency.json]

A control loop calls the dynamics on one state at a time and waits for the result.  JAX's
CPU client by default hands each program to a worker thread (asynchronous dispatch), so
every call pays a thread hand-off; with ``jax.config.update("jax_cpu_enable_async_dispatch",
False)`` before any JAX work the calling thread runs it.  The option is read when JAX creates
its CPU client, so each mode runs in its own process (this script starts itself once per
mode).  Per robot and function: the median over ``--calls`` calls of
``f(model, q, qd, x).block_until_ready()`` (the public function called at top level, as a
user does: jaxdyn's own jit with ``jaxdyn.CPU_OPTIONS``), after a warm-up call whose time is
``compile_s``.  Pinocchio (``aba``, ``rnea``, ``crba``, ``computeABADerivatives``,
``computeRNEADerivatives``) is timed per call in the parent process, in the same run.
f64.  Writes JSON and a PNG plot next to it.
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
sys.path.insert(0, HERE)
from bench_core import URDFS, robots_dir  # noqa: E402

ALGOS = ("aba", "rnea", "crba", "aba_derivatives", "rnea_derivatives")


def median_us(fn, calls):
    """Median wall time of ``fn()`` in µs over ``calls`` calls, after one untimed call."""
    fn()
    ts = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        fn()
        ts[i] = time.perf_counter() - t0
    return 1e6 * float(np.median(ts))


def states(pm, pin, nq, nv, n=64):
    """``n`` random states (q, qd, x) of a Pinocchio model, the same in every process."""
    rng = np.random.default_rng(0)
    np.random.seed(0)
    qs = np.stack([pin.randomConfiguration(pm, -np.ones(nq), np.ones(nq)) for _ in range(n)])
    return qs, rng.normal(size=(n, nv)), rng.normal(size=(n, nv))


def load(rname):
    import pinocchio as pin
    path, fb = URDFS[rname]
    path = os.path.join(robots_dir(), path)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)
    return path, fb, pm, pin


def measure_jaxdyn(robots, calls, sync):
    """Rows for jaxdyn in this process (``sync``: the dispatch mode this process was started with)."""
    import warnings

    import jax
    jax.config.update("jax_cpu_enable_async_dispatch", not sync)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import jaxdyn
    rows = []
    for rname in robots:
        path, fb, pm, pin = load(rname)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = jaxdyn.load_urdf(path, floating_base=fb)
        qs, vs, xs = states(pm, pin, pm.nq, pm.nv)
        q, v, x = (jnp.asarray(a[0]) for a in (qs, vs, xs))
        fns = {"aba": jaxdyn.aba, "rnea": jaxdyn.rnea, "crba": lambda m, q, v, x: jaxdyn.crba(m, q),
               "aba_derivatives": jaxdyn.aba_derivatives, "rnea_derivatives": jaxdyn.rnea_derivatives}
        for algo in ALGOS:
            f = fns[algo]
            t0 = time.perf_counter()
            jax.block_until_ready(f(model, q, v, x))
            tc = time.perf_counter() - t0
            us = median_us(lambda: jax.block_until_ready(f(model, q, v, x)), calls)
            rows.append(dict(robot=rname, lib="jaxdyn-sync" if sync else "jaxdyn", algo=algo, B=1, dtype="f64",
                             us_per_call=us, compile_s=tc))
            print(f"{rname:14s} {rows[-1]['lib']:12s} {algo:17s} {us:8.2f} us/call (compile {tc:.2f} s)",
                  flush=True)
    return rows


def measure_pinocchio(robots, calls):
    rows = []
    for rname in robots:
        _, _, pm, pin = load(rname)
        pd = pm.createData()
        qs, vs, xs = states(pm, pin, pm.nq, pm.nv)
        n = len(qs)
        fns = {"aba": lambda i: pin.aba(pm, pd, qs[i], vs[i], xs[i]),
               "rnea": lambda i: pin.rnea(pm, pd, qs[i], vs[i], xs[i]),
               "crba": lambda i: pin.crba(pm, pd, qs[i]),
               "aba_derivatives": lambda i: pin.computeABADerivatives(pm, pd, qs[i], vs[i], xs[i]),
               "rnea_derivatives": lambda i: pin.computeRNEADerivatives(pm, pd, qs[i], vs[i], xs[i])}
        for algo in ALGOS:
            k = [0]

            def call():
                fns[algo](k[0] % n)
                k[0] += 1
            us = median_us(call, calls)
            rows.append(dict(robot=rname, lib="pinocchio", algo=algo, B=1, dtype="f64", us_per_call=us))
            print(f"{rname:14s} {'pinocchio':12s} {algo:17s} {us:8.2f} us/call", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latency.json"))
    ap.add_argument("--mode", choices=("async", "sync"), help=argparse.SUPPRESS)   # a child process
    args = ap.parse_args()
    robots = args.robots.split(",")
    if args.mode:
        print("ROWS " + json.dumps(measure_jaxdyn(robots, args.calls, args.mode == "sync")), flush=True)
        return
    import jax
    import pinocchio as pin
    rows = measure_pinocchio(robots, args.calls)
    for mode in ("async", "sync"):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--robots", args.robots, "--calls",
                              str(args.calls), "--mode", mode], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("ROWS "):
                rows += json.loads(line[5:])
            else:
                print(line, flush=True)
    results = dict(machine=dict(platform=platform.platform(), cpus=os.cpu_count(), jax=jax.__version__,
                                pinocchio=pin.__version__), rows=rows)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    plot(results, os.path.splitext(args.out)[0] + ".png")
    print("wrote", args.out)


def plot(results, path):
    """One group of bars per function and robot: Pinocchio, jaxdyn (async dispatch), jaxdyn (sync)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = results["rows"]
    robots = sorted({r["robot"] for r in rows})
    libs = [("pinocchio", "Pinocchio"), ("jaxdyn", "jaxdyn, async dispatch (JAX default)"),
            ("jaxdyn-sync", "jaxdyn, jax_cpu_enable_async_dispatch=False")]
    fig, axs = plt.subplots(1, len(ALGOS), figsize=(4 * len(ALGOS), 4.5), squeeze=False)
    w = 0.8 / len(libs)
    for ax, algo in zip(axs[0], ALGOS):
        for j, (lib, label) in enumerate(libs):
            ys = [next((r["us_per_call"] for r in rows if r["robot"] == rb and r["algo"] == algo and r["lib"] == lib),
                       np.nan) for rb in robots]
            ax.bar(np.arange(len(robots)) + (j - 1) * w, ys, w, label=label, color=f"C{j}")
        ax.set_xticks(np.arange(len(robots)), robots, rotation=30, fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{algo}, one state")
        ax.set_ylabel("µs per call (median)")
        ax.grid(alpha=0.3, axis="y", which="both")
    handles, labels = axs[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(libs), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
