"""Throughput and latency of the core algorithms: µs per state of ``jax.jit(jax.vmap(f))`` at
B = 4096 (f64) for aba, rnea, crba and aba_derivatives on panda, anymal_c, talos_reduced and
g1 and a stack of the four, the one-state latency of ``jax.jit(aba)``, against Pinocchio (a
Python loop of one call per state) and, with ``--before DIR``, against an earlier checkout of
jaxdyn in the same run (its own best entry points too: ``aba_batch``, ``derivatives_batch``
and ``jaxdyn.jit`` where it has them); with ``--xla-flags=FLAGS``, against this checkout run
with ``XLA_FLAGS=FLAGS`` (e.g. ``--xla_cpu_use_fusion_emitters=false``, which shortens
compiles: ``docs/performance.md``).

Usage: python benchmarks/bench_engine.py [--before /path/to/old/checkout] [--xla-flags=FLAGS]
         [--rounds 3] [--batch 4096] [--robots panda,anymal_c,talos_reduced,g1] [--cores 0]
         [--out benchmarks/results/engine.json]

The stack rows: the four robots as one ``jaxdyn.stack`` (1024 lanes each, ``vmap`` over the
union tree), the same stack with ``per_member=True`` (each robot's lanes on its own tree,
``per_member``), and the same lanes as one program of four ``vmap`` s, one per robot
(``members``).

Each jaxdyn version runs in its own worker processes (``--rounds`` of them, alternating
between the versions, since timings on a shared machine drift); a time is the least of the
workers' medians.  Every process is pinned to the cores ``--cores`` (default: core 0, one
core for jaxdyn and Pinocchio alike).  JAX's CPU dispatch is synchronous in the workers (the
latency rows).  Writes JSON and a PNG plot.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os

import numpy as np

from timing import alternate  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

HERE = os.path.dirname(os.path.abspath(__file__))

ROBOTS = {"panda": ("panda_description/urdf/panda.urdf", False),
          "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True),
          "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True),
          "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True)}
FUNCS = ("aba", "rnea", "crba", "aba_derivatives")


def states(pm, B, seed=0):
    """B random states of a Pinocchio model (the same in every process)."""
    import pinocchio as pin
    np.random.seed(seed)
    rng = np.random.default_rng(seed)
    lo = np.maximum(np.where(np.isfinite(pm.lowerPositionLimit), pm.lowerPositionLimit, -1.0), -3.0)
    hi = np.minimum(np.where(np.isfinite(pm.upperPositionLimit), pm.upperPositionLimit, 1.0), 3.0)
    Q = np.stack([pin.randomConfiguration(pm, lo, hi) for _ in range(B)])
    return Q, rng.normal(size=(B, pm.nv)), rng.normal(size=(B, pm.nv)) * 5


def pin_model(name):
    import pinocchio as pin
    from jaxdyn.io.named import example_robot_data_dir
    rel, fb = ROBOTS[name]
    path = os.path.join(example_robot_data_dir(), rel)
    return path, fb, (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path))


def median_time(fn, reps=7):
    import time
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def worker(args):
    """Times of one jaxdyn version (the one importable here): {case: µs}."""
    import warnings
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    import jax.numpy as jnp
    import jaxdyn
    warnings.simplefilter("ignore")
    B, out = args.batch, {}
    old = hasattr(jaxdyn, "aba_batch")
    fs = {"aba": jaxdyn.aba, "rnea": jaxdyn.rnea, "crba": lambda m, q, v, t: jaxdyn.crba(m, q),
          "aba_derivatives": jaxdyn.aba_derivatives}
    models = {}
    for name in args.robots.split(","):
        path, fb, pm = pin_model(name)
        m = jaxdyn.load_urdf(path, floating_base=fb)
        models[name] = (m, pm)
        Q, V, T = (jnp.asarray(x) for x in states(pm, B))
        for fn, f in fs.items():
            g = jax.jit(jax.vmap(f, (None, 0, 0, 0)))
            out[f"{name}/{fn}/vmap"] = median_time(lambda: jax.block_until_ready(g(m, Q, V, T))) / B * 1e6
        if old:                     # the earlier version's own best entry points
            out[f"{name}/aba/aba_batch"] = median_time(lambda: jax.block_until_ready(jaxdyn.aba_batch(m, Q, V, T))) / B * 1e6
            g = jaxdyn.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))
            out[f"{name}/aba/jaxdyn_jit"] = median_time(lambda: jax.block_until_ready(g(m, Q, V, T))) / B * 1e6
            out[f"{name}/aba_derivatives/derivatives_batch"] = median_time(
                lambda: jax.block_until_ready(jaxdyn.derivatives_batch(m, Q, V, T))) / B * 1e6
        one = jax.jit(jaxdyn.aba)
        q, v, t = Q[0], V[0], T[0]
        out[f"{name}/aba/latency"] = median_time(lambda: one(m, q, v, t).block_until_ready(), reps=2000) * 1e6
    names = list(models)
    ms = [models[n][0] for n in names]
    st = jaxdyn.stack(ms)
    per = B // len(ms)
    member = np.repeat(np.arange(len(ms)), per)
    S = [tuple(jnp.asarray(x) for x in states(models[n][1], per, seed=1 + j)) for j, n in enumerate(names)]
    if hasattr(st, "lanes"):
        big = st.lanes(member)
        Q, V, T = (jnp.concatenate([f(j, s[k]) for j, s in enumerate(S)])
                   for k, f in ((0, st.q), (1, st.v), (2, st.v)))
    else:
        big = jax.tree_util.tree_map(lambda a: a[member], st)
        Q, V, T = (jnp.concatenate([jaxdyn.pad_state(m, s[k], st.nq if k == 0 else st.nv)
                                    for m, s in zip(ms, S)]) for k in range(3))
    for fn, f in fs.items():
        g = jax.jit(jax.vmap(f))
        out[f"stack/{fn}/vmap"] = median_time(lambda: jax.block_until_ready(g(big, Q, V, T))) / len(member) * 1e6
    if "per_member" in inspect.signature(jaxdyn.stack).parameters:      # each member's lanes on its own tree
        pm = jaxdyn.stack(ms, per_member=True).lanes(member)
        for fn, f in fs.items():
            g = jax.jit(jax.vmap(f))
            out[f"stack/{fn}/per_member"] = median_time(lambda: jax.block_until_ready(g(pm, Q, V, T))) / len(member) * 1e6
    for fn, f in fs.items():                 # the same lanes, each robot's own vmap in one program
        g = jax.jit(lambda ms, S, f=f: [jax.vmap(f, (None, 0, 0, 0))(m, *s) for m, s in zip(ms, S)])
        out[f"stack/{fn}/members"] = median_time(lambda: jax.block_until_ready(g(ms, S))) / len(member) * 1e6
    if old:
        g = jaxdyn.jit(jax.vmap(jaxdyn.aba))
        out["stack/aba/jaxdyn_jit"] = median_time(lambda: jax.block_until_ready(g(big, Q, V, T))) / len(member) * 1e6
    print(json.dumps(out))


def pinocchio_rows(args):
    import pinocchio as pin
    out = {}
    for name in args.robots.split(","):
        _, _, pm = pin_model(name)
        d = pm.createData()
        Q, V, T = states(pm, 256)
        calls = {"aba": lambda i: pin.aba(pm, d, Q[i], V[i], T[i]), "rnea": lambda i: pin.rnea(pm, d, Q[i], V[i], T[i]),
                 "crba": lambda i: pin.crba(pm, d, Q[i]),
                 "aba_derivatives": lambda i: pin.computeABADerivatives(pm, d, Q[i], V[i], T[i])}
        for fn, c in calls.items():
            out[f"{name}/{fn}/pinocchio"] = median_time(lambda: [c(i) for i in range(256)]) / 256 * 1e6
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default=None)
    ap.add_argument("--xla-flags", default=None, help="also time this checkout with these XLA_FLAGS (version "
                    "\"flags\"), alternating with the others; give it as --xla-flags=FLAGS")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--robots", default=",".join(ROBOTS))
    ap.add_argument("--cores", default="0")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "engine.json"))
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    res = alternate(__file__, ["--batch", str(args.batch), "--robots", args.robots], args.before, args.rounds,
                    args.xla_flags)
    res["pinocchio"] = pinocchio_rows(args)
    import jax
    import pinocchio as pin
    meta = dict(batch=args.batch, rounds=args.rounds, cores=args.cores, jax=jax.__version__, pinocchio=pin.__version__,
                before=args.before, xla_flags=args.xla_flags)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(meta=meta, results=res), fh, indent=1)
    for k in sorted(res["after"]):
        row = [f"{res['after'][k]:8.2f}"]
        for v in ("before", "flags"):
            if v in res:
                row.append(f"{res[v].get(k, float('nan')):8.2f}")
        print(f"{k:34s}" + " ".join(row))
    plot(res, args.out.replace(".json", ".png"), args.batch, args.xla_flags)
    print("wrote", args.out)


def plot(res, path, batch, xla_flags=None):
    """One panel per function: µs per state per robot, one bar per version, the
    earlier version's best entry point and Pinocchio."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(FUNCS), figsize=(4.2 * len(FUNCS), 4.6), sharey=False)
    robots = sorted({k.split("/")[0] for k in res["after"]}, key=lambda r: (r == "stack", r))
    series = [("after: jax.jit(jax.vmap(f))", lambda r, f: res["after"].get(f"{r}/{f}/vmap")),
              ("after: per-member stack", lambda r, f: res["after"].get(f"{r}/{f}/per_member")),
              ("after: a vmap per robot (stack)", lambda r, f: res["after"].get(f"{r}/{f}/members"))]
    if "before" in res:
        series.append(("before: jax.jit(jax.vmap(f))", lambda r, f: res["before"].get(f"{r}/{f}/vmap")))
        series.append(("before: best entry point", lambda r, f: min([v for k, v in res["before"].items()
                                                                      if k.startswith(f"{r}/{f}/") and "latency" not in k
                                                                      and "members" not in k] or [np.nan])))
    if "flags" in res:
        series.append((f"after, XLA_FLAGS={xla_flags}: jax.jit(jax.vmap(f))", lambda r, f: res["flags"].get(f"{r}/{f}/vmap")))
    series.append(("Pinocchio, loop (one core)", lambda r, f: res["pinocchio"].get(f"{r}/{f}/pinocchio")))
    w = 0.8 / len(series)
    for ax, f in zip(axes, FUNCS):
        for k, (lab, get) in enumerate(series):
            vals = [get(r, f) or np.nan for r in robots]
            ax.bar(np.arange(len(robots)) + k * w, vals, w, label=lab)
        ax.set_xticks(np.arange(len(robots)) + w * (len(series) - 1) / 2, robots, rotation=20, fontsize=8)
        ax.set_title(f"{f} (f64, B = {batch})")
        ax.set_ylabel("µs per state")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))                        # the legend below the panels
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
