"""NaN/inf sweep: random states of every example-robot-data robot through ``aba_batch``.

Usage: python benchmarks/sweep_finite.py [--states 10000] [--bases fixed,free]
         [--out benchmarks/results/sweep_finite.json]

For every URDF that Pinocchio loads (fixed base, and with a free-flyer root) it draws
``--states`` random states (q uniform within limits / unit quaternions, qd ~ N(0, 1),
tau ~ N(0, 10^2)), runs ``jaxdyn.aba_batch`` in float64 and float32 and reports

* the number of states with a non-finite qdd in each precision;
* for robots with non-finite results: Pinocchio's ``aba`` at (up to 20 of) those states and
  the bodies with a singular articulated inertia (massless on a movable joint, no massive
  descendant), which explain them;
* the float32-vs-float64 error max|qdd32 - qdd64| / max(1, max|qdd64|) (median and max over
  the states finite in both) and cond(M) at the worst state.

Writes JSON and a PNG plot (f32 error per robot).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_core import robots_dir  # noqa: E402


def singular_bodies(model):
    """Movable bodies whose subtree has no mass (their articulated pivot D is 0)."""
    par, mass = np.asarray(model.parent), np.asarray(model.mass)
    sub = mass.copy()
    for i in range(model.nb - 1, -1, -1):
        if par[i] >= 0:
            sub[par[i]] += sub[i]
    return [model.body_names[i] for i in range(model.nb) if sub[i] == 0 and int(model.jtype[i]) != 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=10000)
    ap.add_argument("--bases", default="fixed,free")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "sweep_finite.json"))
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import pinocchio as pin
    import jaxdyn

    R = robots_dir()
    rows = []
    t_all = time.time()
    for f in sorted(glob.glob(os.path.join(R, "**", "*.urdf"), recursive=True)):
        rel = os.path.relpath(f, R)
        for base in args.bases.split(","):
            fb = base == "free"
            try:
                pm = pin.buildModelFromUrdf(f, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(f)
            except Exception as e:
                rows.append(dict(robot=rel, base=base, skipped=f"Pinocchio cannot load it: {str(e)[:80]}"))
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = jaxdyn.load_urdf(f, floating_base=fb)
            if m.nv == 0:
                rows.append(dict(robot=rel, base=base, skipped="nv = 0"))
                continue
            key = jax.random.PRNGKey(0)
            kq, kv, kt = jax.random.split(key, 3)
            Q = jax.jit(jax.vmap(lambda k: jaxdyn.random_configuration(m, k)))(jax.random.split(kq, args.states))
            V = jax.random.normal(kv, (args.states, m.nv), jnp.float64)
            T = 10.0 * jax.random.normal(kt, (args.states, m.nv), jnp.float64)
            t0 = time.time()
            q64 = np.asarray(jaxdyn.aba_batch(m, Q, V, T))
            m32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32) if x.dtype == jnp.float64 else x, m)
            q32 = np.asarray(jaxdyn.aba_batch(m32, Q.astype(jnp.float32), V.astype(jnp.float32),
                                              T.astype(jnp.float32))).astype(np.float64)
            wall = time.time() - t0
            bad64 = ~np.isfinite(q64).all(1)
            bad32 = ~np.isfinite(q32).all(1)
            ok = ~bad64 & ~bad32
            err = np.abs(q32 - q64).max(1) / np.maximum(1.0, np.abs(q64).max(1))
            row = dict(robot=rel, base=base, nb=m.nb, nv=m.nv, states=args.states,
                       nonfinite_f64=int(bad64.sum()), nonfinite_f32=int(bad32.sum()),
                       f32_err_median=float(np.median(err[ok])) if ok.any() else None,
                       f32_err_max=float(err[ok].max()) if ok.any() else None, wall_s=round(wall, 2))
            if ok.any():
                w = int(np.argmax(np.where(ok, err, -1)))
                M = np.asarray(jaxdyn.crba(m, Q[w]))
                row["cond_M_at_worst"] = float(np.linalg.cond(M))
            if bad64.any() or bad32.any():
                idx = np.flatnonzero(bad64 | bad32)[:20]
                data = pm.createData()
                pin_bad = sum(not np.all(np.isfinite(pin.aba(pm, data, np.asarray(Q[i]), np.asarray(V[i]),
                                                             np.asarray(T[i])))) for i in idx)
                row.update(pinocchio_nonfinite_of_checked=f"{pin_bad}/{len(idx)}",
                           singular_bodies=singular_bodies(m))
            rows.append(row)
            jax.clear_caches()      # thousands of live XLA:CPU programs in one process exhaust LLVM's memory
            print(f"{rel:60s} {base:5s} nonfinite f64 {row['nonfinite_f64']:5d} f32 {row['nonfinite_f32']:5d}  "
                  f"f32 err median {row['f32_err_median'] or float('nan'):.1e} max {row['f32_err_max'] or float('nan'):.1e}"
                  + (f"  pin {row['pinocchio_nonfinite_of_checked']} {row['singular_bodies'][:3]}"
                     if "singular_bodies" in row else ""), flush=True)
    meta = dict(jax=jax.__version__, pinocchio=pin.__version__, states=args.states, wall_s=round(time.time() - t_all, 1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(meta=meta, rows=rows), fh, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        done = [r for r in rows if "nv" in r and r["f32_err_max"] is not None]
        fig, ax = plt.subplots(figsize=(12, 5))
        x = np.arange(len(done))
        ax.semilogy(x, [r["f32_err_median"] for r in done], "o", label="f32 vs f64, median")
        ax.semilogy(x, [r["f32_err_max"] for r in done], "x", label="f32 vs f64, max")
        for i, r in enumerate(done):
            if r["nonfinite_f64"] or r["nonfinite_f32"]:
                ax.axvline(i, color="r", alpha=0.2)
        ax.set_xticks(x, [f"{os.path.basename(r['robot'])[:-5]}{'*' if r['base'] == 'free' else ''}" for r in done],
                      rotation=90, fontsize=6)
        ax.set_ylabel("relative error of qdd")
        ax.set_title(f"aba_batch, {args.states} random states per robot (* free-flyer; red: non-finite states)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out[:-5] + ".png", dpi=120)
    except ImportError:
        pass
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
