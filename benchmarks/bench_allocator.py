"""Derivative batches with and without ``jaxdyn.tune_host_allocator()``, alternately in one
process, against Pinocchio in the same loop.

Usage: python benchmarks/bench_allocator.py [--robots panda,anymal_c,talos_reduced,g1]
         [--batch 4096] [--reps 6] [--out benchmarks/results/allocator.json]

A batch of derivatives returns (B, nv, nv) matrices; with glibc's default settings every
call writes them into freshly mapped pages (``jaxdyn/host_memory.py``).  Each repetition
times one ``derivatives_batch(model, Q, QD, TAU, devices=1)`` call (ABA derivatives, f64,
one JAX CPU device) with glibc's defaults, then one with the setting of
``tune_host_allocator``, then one with glibc's defaults that writes into the previous
call's result (``out=``, its buffers donated; each after two untimed calls in that mode),
then Pinocchio's
``computeABADerivatives`` on 256 states in a Python loop; the setting is switched back and
forth by ``mallopt`` (this VM's speed drifts by tens of percent over minutes, so the modes are
interleaved instead of run in separate processes).  Reports min and median µs per state.
Writes JSON and a PNG plot next to it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_core import derivatives_into, load_pair, random_states  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "allocator.json"))
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import pinocchio as pin
    import jaxdyn
    from jaxdyn import host_memory

    libc = host_memory._libc()
    if libc is None:
        sys.exit("bench_allocator: the C library has no mallopt (glibc only)")

    def setting(tuned):
        """glibc's defaults (dynamic mmap threshold aside) or tune_host_allocator's."""
        libc.mallopt(host_memory.M_MMAP_MAX, 0 if tuned else 65536)
        libc.mallopt(host_memory.M_TRIM_THRESHOLD, host_memory.KEEP_FREED_BYTES if tuned else 128 * 1024)

    B = args.batch
    res = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "jax": jax.__version__, "pinocchio": pin.__version__, "dtype": "f64", "B": B,
           "reps": args.reps, "robots": {}}
    for name in args.robots.split(","):
        m, pm = load_pair(name)
        pd = pm.createData()
        Qn, Vn, Tn = random_states(pm, B)
        Q, V, T = jnp.asarray(Qn), jnp.asarray(Vn), jnp.asarray(Tn)
        f = lambda: jax.block_until_ready(jaxdyn.derivatives_batch(m, Q, V, T, devices=1))
        f()
        into = derivatives_into(m, Q, V, T)     # writes into the previous result (out=, donated)
        into()
        times = {"default_us": [], "tuned_us": [], "out_us": [], "pin_us": []}
        for _ in range(args.reps):
            for mode, g in (("default", f), ("tuned", f), ("out", into)):
                setting(mode == "tuned")
                g(), g()
                t0 = time.perf_counter()
                g()
                times[f"{mode}_us"].append((time.perf_counter() - t0) / B * 1e6)
            t0 = time.perf_counter()
            for i in range(256):
                pin.computeABADerivatives(pm, pd, Qn[i], Vn[i], Tn[i])
            times["pin_us"].append((time.perf_counter() - t0) / 256 * 1e6)
        setting(False)
        row = {"nv": m.nv}
        for k, v in times.items():
            row[k.replace("_us", "_min_us")] = float(np.min(v))
            row[k.replace("_us", "_median_us")] = float(np.median(v))
        res["robots"][name] = row
        print(name, json.dumps({k: round(v, 2) for k, v in row.items()}), flush=True)
        jax.clear_caches()

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    plot(res, args.out.replace(".json", ".png"))


def plot(res, path):
    """Bars per robot: median µs per state, default allocator, tuned, Pinocchio."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["robots"])
    series = [("derivatives_batch, glibc defaults", "default_median_us"),
              ("derivatives_batch, tune_host_allocator()", "tuned_median_us"),
              ("derivatives_batch(out=previous), glibc defaults", "out_median_us"),
              ("Pinocchio computeABADerivatives", "pin_median_us")]
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.8 / len(series)
    for j, (lab, key) in enumerate(series):
        ax.bar(np.arange(len(names)) + j * w, [res["robots"][n][key] for n in names], w, label=lab)
    ax.set_xticks(np.arange(len(names)) + 0.4 - w / 2)
    ax.set_xticklabels(names)
    ax.set_ylabel(f"µs per state (median of {res['reps']}; B = {res['B']}, f64, one core)")
    ax.legend(fontsize=8)
    ax.set_title("ABA derivatives: the host allocator setting")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
