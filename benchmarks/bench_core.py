"""Core-dynamics throughput: µs per robot-step for rnea / crba / aba, jaxdyn vs Pinocchio.

Usage: python benchmarks/bench_core.py [--robots panda,g1] [--batches 1,64,4096]
         [--dtypes f64,f32] [--algos aba,rnea,crba] [--host-devices 2] [--sync-dispatch]
         [--out benchmarks/results/core.json]

For each robot, dtype, algorithm and batch size B it jit-compiles ``vmap(algo)`` (B > 1, a
plain ``jax.jit`` as a user writes it; XLA's default options) and calls ``jax.vmap(algo)``
eagerly (compiled with ``jaxdyn.CPU_OPTIONS``), or calls the public ``jaxdyn.algo`` at top level as a user does (B = 1: jaxdyn's own jit with
``jaxdyn.CPU_OPTIONS``; the compile time is the first call's), and reports the median wall
time of repeated calls divided by B (each call waits for its result).  For aba and B = 1 it
also times the sweeps that one state ran before the closed form (``batch_aba.aba_one_state``,
row ``jaxdyn-one-state-sweeps``; what f32 still runs).  For aba and B > 1 it also measures ``jaxdyn.aba_batch`` (the throughput ABA, called
top-level so that it compiles with ``jaxdyn.CPU_OPTIONS``) on one device and on all
``--host-devices`` (default: one JAX CPU device per core).  Pinocchio is measured in the same
run: a Python loop of ``pin.aba`` / ``pin.rnea`` / ``pin.crba`` (per call, one core) and
``pin.abaInParallel`` on 2 threads when available.  Writes JSON and a PNG plot.
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
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from timing import timeit  # noqa: E402

URDFS = {
    "panda": ("panda_description/urdf/panda.urdf", False),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True),
    "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True),
}


def robots_dir():
    for p in sys.path:
        d = os.path.join(p, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(d):
            return d
    raise SystemExit("example-robot-data not installed (pip install -e '.[test]')")


def load_pair(name):
    """(jaxdyn model, Pinocchio model) of the benchmark robot ``name`` (:data:`URDFS`); import
    after JAX's configuration is set."""
    import jaxdyn
    import pinocchio as pin
    rel, fb = URDFS[name]
    path = os.path.join(robots_dir(), rel)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)
    return jaxdyn.load_urdf(path, floating_base=fb), pm


def random_states(pm, B, seed=0):
    """B numpy states (Q (B, nq), V, T (B, nv)) of the Pinocchio model ``pm``: random
    configurations within its limits (unbounded ones taken as [-1, 1], all cut to [-3, 3]),
    standard normal velocities and torques (seeded)."""
    import pinocchio as pin
    r = np.random.default_rng(seed)
    lo, hi = pm.lowerPositionLimit.copy(), pm.upperPositionLimit.copy()
    lo[~np.isfinite(lo)] = -1.0
    hi[~np.isfinite(hi)] = 1.0
    Q = np.stack([pin.randomConfiguration(pm, np.maximum(lo, -3), np.minimum(hi, 3)) for _ in range(B)])
    return Q, r.normal(size=(B, pm.nv)), r.normal(size=(B, pm.nv))


def derivatives_into(m, Q, V, T, fn="aba"):
    """A function of no arguments that runs ``jaxdyn.derivatives_batch(m, Q, V, T, fn=fn,
    devices=1)`` and waits for it, each call writing into the previous call's result
    (``out=``, donated); the first result is made here.  Drop the function to free them."""
    import jax
    import jaxdyn
    state = [jaxdyn.derivatives_batch(m, Q, V, T, fn=fn, devices=1)]

    def into():
        state[0] = jax.block_until_ready(jaxdyn.derivatives_batch(m, Q, V, T, fn=fn, devices=1, out=state[0]))
    return into


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--batches", default="1,64,4096")
    ap.add_argument("--dtypes", default="f64,f32")
    ap.add_argument("--algos", default="aba,rnea,crba")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "core.json"))
    ap.add_argument("--sync-dispatch", action="store_true",
                    help="jax_cpu_enable_async_dispatch=False: the calling thread runs one-device programs")
    ap.add_argument("--host-devices", type=int, default=os.cpu_count() or 1,
                    help="JAX CPU devices (one per core); aba_batch is measured on 1 and on all")
    args = ap.parse_args()

    import jax
    jax.config.update("jax_num_cpu_devices", args.host_devices)
    jax.config.update("jax_cpu_enable_async_dispatch", not args.sync_dispatch)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import pinocchio as pin

    import jaxdyn

    rd = robots_dir()
    results = dict(machine=dict(platform=platform.platform(), cpus=os.cpu_count(), jax=jax.__version__,
                                pinocchio=pin.__version__, device=str(jax.devices()[0]),
                                async_dispatch=not args.sync_dispatch), rows=[])
    for rname in args.robots.split(","):
        path, fb = URDFS[rname]
        path = os.path.join(rd, path)
        model64 = jaxdyn.load_urdf(path, floating_base=fb)
        pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path)
        pd = pm.createData()
        rng = np.random.default_rng(0)
        nq, nv = pm.nq, pm.nv
        Bmax = max(int(b) for b in args.batches.split(","))
        qs = np.stack([pin.randomConfiguration(pm, -np.ones(nq), np.ones(nq)) for _ in range(min(Bmax, 256))])
        qs = np.resize(qs, (Bmax, nq))
        vs, taus = rng.normal(size=(Bmax, nv)), rng.normal(size=(Bmax, nv))
        # Pinocchio per-call loops
        pin_fns = {"aba": lambda i: pin.aba(pm, pd, qs[i], vs[i], taus[i]),
                   "rnea": lambda i: pin.rnea(pm, pd, qs[i], vs[i], taus[i]),
                   "crba": lambda i: pin.crba(pm, pd, qs[i])}
        for algo in args.algos.split(","):
            n = 2000
            t = timeit(lambda: [pin_fns[algo](i % Bmax) for i in range(n)], min_time=0.3) / n
            results["rows"].append(dict(robot=rname, lib="pinocchio", algo=algo, B=1, dtype="f64",
                                        us_per_robot_step=1e6 * t))
            print(f"{rname:14s} pinocchio {algo:5s} loop         {1e6 * t:9.3f} us/call", flush=True)
        if hasattr(pin, "abaInParallel") and "aba" in args.algos:
            try:
                Q, V, TAU = (np.asfortranarray(x.T) for x in (qs, vs, taus))
                pool = pin.ModelPool(pm, 2)
                res = np.zeros((nv, Bmax), order="F")
                t = timeit(lambda: pin.abaInParallel(2, pool, Q, V, TAU, res), min_time=0.3) / Bmax
                results["rows"].append(dict(robot=rname, lib="pinocchio-parallel2", algo="aba", B=Bmax,
                                            dtype="f64", us_per_robot_step=1e6 * t))
                print(f"{rname:14s} pinocchio abaInParallel(2) B={Bmax} {1e6 * t:9.3f} us/robot", flush=True)
            except Exception as e:  # binding signature differs between versions
                print(f"{rname}: abaInParallel not measured ({type(e).__name__}: {e})", flush=True)
        for dname in args.dtypes.split(","):
            dt = jnp.float64 if dname == "f64" else jnp.float32
            model = jax.tree_util.tree_map(lambda x: x.astype(dt) if jnp.issubdtype(x.dtype, jnp.floating) else x,
                                           model64)
            fns = {"aba": lambda m, q, v, t: jaxdyn.aba(m, q, v, t),
                   "rnea": lambda m, q, v, t: jaxdyn.rnea(m, q, v, t),
                   "crba": lambda m, q, v, t: jaxdyn.crba(m, q)}
            for algo in args.algos.split(","):
                for B in (int(b) for b in args.batches.split(",")):
                    f = fns[algo]
                    Q = jnp.asarray(qs[0] if B == 1 else qs[:B], dt)
                    V = jnp.asarray(vs[0] if B == 1 else vs[:B], dt)
                    T = jnp.asarray(taus[0] if B == 1 else taus[:B], dt)
                    if B == 1:      # the public function called at top level, as a user does
                        g = f       # (jaxdyn's own jit, with CPU_OPTIONS); compile_s = first call
                        t0 = time.perf_counter()
                        jax.block_until_ready(g(model, Q, V, T))
                    else:
                        g = jax.jit(jax.vmap(f, in_axes=(None, 0, 0, 0)))
                        t0 = time.perf_counter()
                        g.lower(model, Q, V, T).compile()
                    tc = time.perf_counter() - t0
                    t = timeit(lambda: g(model, Q, V, T).block_until_ready()) / B
                    results["rows"].append(dict(robot=rname, lib="jaxdyn", algo=algo, B=B, dtype=dname,
                                                us_per_robot_step=1e6 * t, compile_s=tc))
                    print(f"{rname:14s} jaxdyn    {algo:5s} {dname} B={B:5d} {1e6 * t:9.3f} us/robot-step "
                          f"(compile {tc:.2f} s)", flush=True)
                    if B > 1:       # eager vmap (no jit of the caller's): compiles with CPU_OPTIONS
                        ev = jax.vmap(f, in_axes=(None, 0, 0, 0))
                        t0 = time.perf_counter()
                        jax.block_until_ready(ev(model, Q, V, T))
                        tc = time.perf_counter() - t0
                        t = timeit(lambda: jax.block_until_ready(ev(model, Q, V, T))) / B
                        results["rows"].append(dict(robot=rname, lib="jaxdyn-eager-vmap", algo=algo, B=B, dtype=dname,
                                                    us_per_robot_step=1e6 * t, compile_s=tc))
                        print(f"{rname:14s} eager vmap {algo:5s} {dname} B={B:5d} {1e6 * t:9.3f} us/robot-step "
                              f"(first call {tc:.2f} s)", flush=True)
                    if algo == "aba" and B == 1:
                        # what one state ran before the closed form (and still runs in f32):
                        # the batch-last kernel's sweeps without the batch axis
                        from jaxdyn.dynamics.batch_aba import aba_one_state
                        g = jaxdyn.jit(aba_one_state)
                        t0 = time.perf_counter()
                        jax.block_until_ready(g(model, Q, V, T))
                        tc = time.perf_counter() - t0
                        t = timeit(lambda: g(model, Q, V, T).block_until_ready())
                        results["rows"].append(dict(robot=rname, lib="jaxdyn-one-state-sweeps", algo=algo, B=B,
                                                    dtype=dname, us_per_robot_step=1e6 * t, compile_s=tc))
                        print(f"{rname:14s} sweeps    {algo:5s} {dname} B={B:5d} {1e6 * t:9.3f} us/robot-step "
                              f"(compile {tc:.2f} s)", flush=True)
                    if algo != "aba" or B == 1:
                        continue
                    # the throughput ABA, called top-level (compiled with CPU_OPTIONS), on one
                    # device (one core) and on all host devices
                    for nd in sorted({1, jax.device_count()}):
                        run = lambda: jaxdyn.aba_batch(model, Q, V, T, devices=nd).block_until_ready()
                        t0 = time.perf_counter()
                        run()
                        tc = time.perf_counter() - t0
                        t = timeit(run) / B
                        lib = "jaxdyn-batch" if nd == 1 else f"jaxdyn-batch-{nd}dev"
                        results["rows"].append(dict(robot=rname, lib=lib, algo=algo, B=B, dtype=dname,
                                                    us_per_robot_step=1e6 * t, compile_s=tc, devices=nd))
                        print(f"{rname:14s} aba_batch {nd} dev {dname} B={B:5d} {1e6 * t:9.3f} us/robot-step "
                              f"(first call {tc:.2f} s)", flush=True)
                        if nd > 1:  # inputs already split over the devices, and what splitting costs
                            from jax.sharding import NamedSharding, PartitionSpec
                            from jaxdyn.dynamics.chunks import batch_mesh, split_rows
                            parts = split_rows((Q, V, T), 128, nd)
                            run = lambda: jaxdyn.aba_batch(model, *parts, devices=nd).block_until_ready()
                            t = timeit(run) / B
                            sh = NamedSharding(batch_mesh(nd), PartitionSpec("b"))
                            ts = timeit(lambda: jax.block_until_ready(split_rows((Q, V, T), 128, nd)))
                            tp = timeit(lambda: jax.block_until_ready(jax.device_put((Q, V, T), sh)))
                            results["rows"].append(dict(robot=rname, lib=f"jaxdyn-batch-{nd}dev-presplit", algo=algo,
                                                        B=B, dtype=dname, us_per_robot_step=1e6 * t, devices=nd,
                                                        split_rows_us=1e6 * ts, device_put_us=1e6 * tp))
                            print(f"{rname:14s} aba_batch {nd} dev, inputs already split {1e6 * t:9.3f} us/robot-step; "
                                  f"splitting q, qd, tau: split_rows {1e6 * ts:.0f} us, device_put {1e6 * tp:.0f} us",
                                  flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    plot(results, args.out[:-5] + ".png")
    print("wrote", args.out)


def plot(results, path):
    """One panel per algorithm: colour = robot, marker = implementation, dotted = f32; dashed
    horizontal lines = Pinocchio per call (same colour)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = results["rows"]
    robots = sorted({r["robot"] for r in rows})
    algos = sorted({r["algo"] for r in rows})
    colour = {rb: f"C{i}" for i, rb in enumerate(robots)}
    multi = sorted({r["lib"] for r in rows if r["lib"].startswith("jaxdyn-batch-")})
    libs = [("jaxdyn", "o", "jit(vmap)"), ("jaxdyn-eager-vmap", "v", "eager vmap"), ("jaxdyn-batch", "s", "aba_batch 1 dev"),
            ("jaxdyn-one-state-sweeps", "x", "aba one-state sweeps")]
    libs += [(lib, ">" if lib.endswith("presplit") else "^",
              "aba_batch " + lib.split("-")[2].replace("dev", " dev") + (", inputs split" if lib.endswith("presplit") else ""))
             for lib in multi]
    fig, axs = plt.subplots(1, len(algos), figsize=(5.5 * len(algos), 5), squeeze=False)
    for ax, algo in zip(axs[0], algos):
        for rb in robots:
            for lib, mk, _ in libs:
                for dt, ls in (("f64", "-"), ("f32", ":")):
                    pts = sorted((r["B"], r["us_per_robot_step"]) for r in rows
                                 if r["robot"] == rb and r["algo"] == algo and r["lib"] == lib and r["dtype"] == dt)
                    if pts:
                        ax.loglog(*zip(*pts), ls, marker=mk, color=colour[rb], ms=4, lw=1)
            pin_rows = [r for r in rows if r["robot"] == rb and r["algo"] == algo and r["lib"] == "pinocchio"]
            if pin_rows:
                ax.axhline(pin_rows[0]["us_per_robot_step"], ls="--", lw=0.8, color=colour[rb])
        ax.set_title(f"{algo}: µs per robot-step (f64 solid, f32 dotted)")
        ax.set_xlabel("batch size B")
        ax.set_ylabel("µs / robot-step")
        ax.grid(alpha=0.3, which="both")
    handles = [plt.Line2D([], [], color=colour[rb], lw=2, label=rb) for rb in robots]
    handles += [plt.Line2D([], [], color="k", marker=mk, ls="", label=lab) for _, mk, lab in libs]
    handles += [plt.Line2D([], [], color="k", ls="--", lw=0.8, label="Pinocchio per call")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
