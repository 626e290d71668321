"""Scaling of every forward-dynamics method with the number of bodies.

Usage: python benchmarks/bench_scaling.py [--sizes 2,4,...,1024] [--branches 2,4,...,12]
         [--methods aba,crba,udut,...] [--out benchmarks/results/scaling.json]

Cases
* serial revolute chains, n = 2 .. 1024 (Saha Table I: O(n) beats O(n^3) for n >= 10);
* Yamane-Nakamura Fig. 7: b = 2 .. 12 single-link branches, each on a spherical joint,
  hanging from a link on a spherical joint to the ground (9 .. 39 dof).
Each point: median wall time of one jitted call (B = 1, f64) on this CPU, plus compile time,
and the dispatch floor (a jitted call that returns its input).  "crba" (CRBA + RNEA +
Cholesky) is the O(n^3) reference.  Writes JSON and a log-log PNG.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

from timing import timeit  # noqa: E402  (benchmarks/ is on sys.path when run as a script)


def chain(n):
    import jaxdyn
    return jaxdyn.robots.random_tree(n, 0.0, seed=n, joint_types=("revolute",))


def branched(b, seed=0):
    """Yamane Fig. 7: link 0 on a spherical joint to the ground, b links on spherical joints."""
    from jaxdyn.io.robots import random_inertia
    from jaxdyn.model import build_model
    rng = np.random.default_rng(seed)
    nb = b + 1
    parent = [-1] + [0] * b
    E = np.stack([np.eye(3)] * nb)
    r = np.zeros((nb, 3))
    ang = np.linspace(0, 2 * np.pi, b, endpoint=False)
    r[1:, 0], r[1:, 1], r[1:, 2] = 0.2 * np.cos(ang), 0.2 * np.sin(ang), -0.1
    mass = rng.uniform(0.5, 2.0, nb)
    com = np.zeros((nb, 3)); com[:, 2] = -0.15
    inertia = np.stack([random_inertia(rng, m) for m in mass])
    return build_model(parent=parent, jtype=["spherical"] * nb, Xtree_E=E, Xtree_r=r,
                       axis=np.tile([0.0, 0.0, 1.0], (nb, 1)), mass=mass, com=com, inertia=inertia,
                       name=f"branched{b}")


def measure(model, methods, rows, case, size):
    import jax
    import jax.numpy as jnp
    import jaxdyn
    q = jaxdyn.random_configuration(model, jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    qd = jnp.asarray(rng.normal(size=model.nv))
    tau = jnp.asarray(rng.normal(size=model.nv))
    ref = None
    for meth in methods:
        f = jax.jit(lambda q, qd, tau, meth=meth: jaxdyn.forward_dynamics(model, q, qd, tau, method=meth))
        t0 = time.perf_counter()
        out = f(q, qd, tau).block_until_ready()
        comp = time.perf_counter() - t0
        ref = out if ref is None else ref
        err = float(jnp.abs(out - ref).max() / max(1.0, float(jnp.abs(ref).max())))
        t = timeit(lambda: f(q, qd, tau).block_until_ready(), min_time=0.3, min_reps=5, max_reps=500)
        rows.append(dict(case=case, size=size, nv=model.nv, method=meth, us=t * 1e6, compile_s=comp,
                         rel_err_vs_first=err))
        print(f"{case:8s} {size:5d} nv={model.nv:5d} {meth:13s} {t * 1e6:10.1f} us  "
              f"compile {comp:5.2f} s  err {err:.1e}", flush=True)
    jax.clear_caches()


def crossover(rows, case, method, ref="crba"):
    """Smallest size from which ``method`` stays faster than ``ref``."""
    sizes = sorted({r["size"] for r in rows if r["case"] == case})
    t = {(r["size"], r["method"]): r["us"] for r in rows if r["case"] == case}
    ok = [s for s in sizes if (s, method) in t and (s, ref) in t and t[(s, method)] < t[(s, ref)]]
    for s in sizes:
        if all(x in ok for x in sizes if x >= s):
            return s
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2,4,8,16,32,64,128,256,512,1024")
    ap.add_argument("--branches", default="2,4,6,8,10,12")
    ap.add_argument("--methods", default="aba,crba,udut,operator_fd1,operator_fd2,operator_fd3,"
                                         "operator_fd4,virtual_work")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "scaling.json"))
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    methods = args.methods.split(",")
    ident = jax.jit(lambda x: x)
    x = jnp.zeros(8)
    floor = timeit(lambda: ident(x).block_until_ready(), min_time=0.3, min_reps=5, max_reps=500) * 1e6
    print(f"dispatch floor {floor:.1f} us")
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        measure(chain(n), methods, rows, "chain", n)
    for b in [int(s) for s in args.branches.split(",") if s]:
        measure(branched(b), methods, rows, "branched", b)
    res = dict(machine=dict(platform=platform.platform(), cpus=os.cpu_count(), jax=jax.__version__,
                            device=str(jax.devices()[0])), dispatch_floor_us=floor, rows=rows,
               crossover_vs_crba={c: {m: crossover(rows, c, m) for m in methods if m != "crba"}
                                  for c in ("chain", "branched")})
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print("crossover (size from which faster than crba):", json.dumps(res["crossover_vs_crba"]))
    plot(res, os.path.splitext(args.out)[0] + ".png")


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axs = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, case, xl in ((axs[0], "chain", "bodies n (revolute chain)"),
                         (axs[1], "branched", "branches b (spherical joints, dof = 3 + 3b)")):
        rows = [r for r in res["rows"] if r["case"] == case]
        for m in sorted({r["method"] for r in rows}):
            rr = sorted((r for r in rows if r["method"] == m), key=lambda r: r["size"])
            ax.plot([r["size"] for r in rr], [r["us"] for r in rr], "o-" if m != "crba" else "k--",
                    label=m, ms=3)
        ax.axhline(res["dispatch_floor_us"], color="gray", lw=0.8, ls=":", label="jit dispatch floor")
        ax.set_xlabel(xl)
        ax.set_ylabel("time per call (us), B = 1, f64")
        if case == "chain":
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.set_title(case)
    axs[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
