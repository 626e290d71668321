"""Throughput on an accelerator: µs per state of jaxdyn's batched entry points on JAX's default
backend (a GPU where there is one), and their agreement with the CPU backend in the same process.

Usage: python benchmarks/bench_gpu.py [--robots panda,anymal_c,talos_reduced,g1]
         [--batches 4096,65536] [--dtypes f64,f32] [--deriv-batch 4096] [--robots-dir DIR]
         [--out benchmarks/results/gpu.json]

Needs no Pinocchio (the GPU machine has none): the robots are the URDFs of
``bench_engine.ROBOTS`` under ``--robots-dir`` (default: example-robot-data's folder), states
are ``jaxdyn.random_configuration`` and standard normal velocities and torques.  Per robot,
dtype and batch size B (each call waits for its result; median of repeated calls / B):

* ``vmap_aba``: ``jax.jit(jax.vmap(jaxdyn.aba))``;
* ``vmap_rnea``: ``jax.jit(jax.vmap(jaxdyn.rnea))``;
* at ``--deriv-batch`` (f64): ``vmap_aba_derivatives``, ``jax.jit(jax.vmap(jaxdyn.aba_derivatives))``,
  and ``vmap_grad_aba``, ``jax.jit(jax.vmap(jax.grad(...)))`` of a scalar of ``jaxdyn.aba``;
* a ``jaxdyn.stack`` of all the robots under ``vmap(aba)`` (lanes grouped by member) vs the same
  batch of its largest member alone.

(Before the one-engine rewrite the rows ``aba_batch`` and ``derivatives_batch`` timed the entry
points that ``vmap`` replaces; compare them with ``vmap_aba`` and ``vmap_aba_derivatives``.)

Agreement (key ``check``): each function's result on the default backend against the same
function on the CPU backend (``jax.default_device``), as the largest relative error, and the
identity ``rnea(q, qd, aba(q, qd, tau)) = tau`` on the default backend.  Rows are written to the
JSON as they are measured, so a run stopped early keeps what it measured.
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
from bench_engine import ROBOTS as URDFS  # noqa: E402
from timing import timeit  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--batches", default="4096,65536")
    ap.add_argument("--dtypes", default="f64,f32")
    ap.add_argument("--deriv-batch", type=int, default=4096)
    ap.add_argument("--robots-dir", default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gpu.json"))
    args = ap.parse_args()

    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxdyn
    from jaxdyn.io.named import example_robot_data_dir

    dev = jax.devices()[0]
    cpu = jax.devices("cpu")[0]
    res = {"machine": platform.machine(), "jax": jax.__version__, "backend": jax.default_backend(),
           "device": getattr(dev, "device_kind", str(dev)), "robots": {}, "check": {}}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)

    def timed(key, row, f, B):
        """Compile (first call) and time f(); µs per state into row."""
        t0 = time.perf_counter()
        jax.block_until_ready(f())
        row[f"{key}_compile_s"] = time.perf_counter() - t0
        row[f"{key}_us"] = timeit(lambda: jax.block_until_ready(f()), min_time=0.3) / B * 1e6
        print(f"  {key:28s} {row[key + '_us']:9.4f} us/state  (compile {row[key + '_compile_s']:.1f} s)",
              flush=True)

    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))

    rd = args.robots_dir or example_robot_data_dir()
    batches = [int(b) for b in args.batches.split(",")]
    Bmax = max(batches + [args.deriv_batch])
    models, states = {}, {}
    for name in args.robots.split(","):
        rel_path, fb = URDFS[name]
        m = jaxdyn.load_urdf(os.path.join(rd, rel_path), floating_base=fb)
        keys = jax.random.split(jax.random.PRNGKey(0), Bmax)
        with jax.default_device(cpu):
            Q = np.asarray(jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys))
        r = np.random.default_rng(0)
        models[name], states[name] = m, (Q, r.normal(size=(Bmax, m.nv)), r.normal(size=(Bmax, m.nv)))

    for name, m64 in models.items():
        res["robots"][name] = {"nv": m64.nv, "nb": m64.nb}
        for dname in args.dtypes.split(","):
            dt = jnp.float64 if dname == "f64" else jnp.float32
            m = jax.tree_util.tree_map(lambda x: x.astype(dt) if jnp.issubdtype(x.dtype, jnp.floating) else x, m64)
            va = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))
            vr = jax.jit(jax.vmap(jaxdyn.rnea, (None, 0, 0, 0)))
            for B in batches:
                Q, V, T = (jnp.asarray(x[:B], dt) for x in states[name])
                row = res["robots"][name].setdefault(f"{dname}_B{B}", {})
                print(f"{name} {dname} B={B}", flush=True)
                timed("vmap_aba", row, lambda: va(m, Q, V, T), B)
                timed("vmap_rnea", row, lambda: vr(m, Q, V, T), B)
                save()
            B = min(args.deriv_batch, Bmax)
            Q, V, T = (jnp.asarray(x[:B], dt) for x in states[name])
            qdd = va(m, Q, V, T)
            with jax.default_device(cpu):
                mc, Qc, Vc, Tc = jax.device_put((m, Q, V, T), cpu)
                qdd_cpu = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(mc, Qc, Vc, Tc)
                tau_cpu = jax.jit(jax.vmap(jaxdyn.rnea, (None, 0, 0, 0)))(mc, Qc, Vc, qdd_cpu)
            chk = res["check"].setdefault(name, {})
            chk[f"{dname}_vmap_aba_vs_cpu"] = rel(qdd, qdd_cpu)
            chk[f"{dname}_vmap_rnea_vs_cpu"] = rel(vr(m, Q, V, qdd), tau_cpu)
            chk[f"{dname}_rnea_of_aba_vs_tau"] = rel(vr(m, Q, V, qdd), T)
            print(" ", {k: f"{v:.1e}" for k, v in chk.items() if k.startswith(dname)}, flush=True)
            save()
            if dname != "f64":
                continue
            row = res["robots"][name].setdefault(f"{dname}_B{B}", {})
            print(f"{name} {dname} derivatives B={B}", flush=True)
            vd = jax.jit(jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0)))
            timed("vmap_aba_derivatives", row, lambda: vd(m, Q, V, T), B)
            w = jnp.asarray(np.random.default_rng(1).normal(size=m.nv))
            g = jax.jit(jax.vmap(jax.grad(lambda q, v, t: jaxdyn.aba(m, q, v, t) @ w, argnums=(0, 1, 2))))
            timed("vmap_grad_aba", row, lambda: g(Q, V, T), B)
            D = vd(m, Q[:64], V[:64], T[:64])
            with jax.default_device(cpu):
                Dc = jax.jit(jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0)))(
                    *jax.device_put((m, Q[:64], V[:64], T[:64]), cpu))
            chk["f64_derivatives_vs_cpu"] = max(rel(a, b) for a, b in zip(D, Dc))
            print("  derivatives vs cpu", f"{chk['f64_derivatives_vs_cpu']:.1e}", flush=True)
            save()
        jax.clear_caches()

    if len(models) > 1:
        res["stack"] = stack_rows(models, states, batches)
        save()
    print(json.dumps(res["check"], indent=1))
    plot(res, args.out.replace(".json", ".png"))


def stack_rows(models, states, batches):
    """``vmap(aba)`` over a ``jaxdyn.stack`` of all the models (f64, lanes grouped by member,
    B / len(models) each) vs the same batch of the largest member alone, µs per state, and the
    stack's answers vs the members' own ``vmap(aba)``."""
    import jax
    import jax.numpy as jnp
    import jaxdyn
    ms = list(models.values())
    big = max(ms, key=lambda m: m.nv)
    st = jaxdyn.stack(ms)
    out = {"members": list(models)}
    for B in batches:
        per = B // len(ms)
        member = np.repeat(np.arange(len(ms)), per)
        stb = st.lanes(member)
        Q, V, T = (jnp.concatenate([f(j, jnp.asarray(states[n][i][:per])) for j, n in enumerate(models)])
                   for i, f in ((0, st.q), (1, st.v), (2, st.v)))
        nbig = [n for n, m in models.items() if m is big][0]
        Qb, Vb, Tb = (jnp.asarray(x[:len(member)]) for x in states[nbig])
        va, vb = jax.jit(jax.vmap(jaxdyn.aba)), jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))
        n = len(member)
        t0 = time.perf_counter()
        qdd = jax.block_until_ready(va(stb, Q, V, T))
        out[f"B{n}_stack_compile_s"] = time.perf_counter() - t0
        out[f"B{n}_stack_us"] = timeit(lambda: jax.block_until_ready(va(stb, Q, V, T)), min_time=0.3) / n * 1e6
        out[f"B{n}_{nbig}_alone_us"] = timeit(lambda: jax.block_until_ready(vb(big, Qb, Vb, Tb)), min_time=0.3) / n * 1e6
        err = 0.0
        for i, m in enumerate(ms):
            s = slice(i * per, (i + 1) * per)
            own = vb(m, jnp.asarray(states[list(models)[i]][0][:per]), *(jnp.asarray(states[list(models)[i]][k][:per])
                                                                        for k in (1, 2)))
            err = max(err, float(jnp.max(jnp.abs(st.member_v(i, qdd[s]) - own)) / max(1.0, float(jnp.max(jnp.abs(own))))))
        out[f"B{n}_stack_vs_members"] = err
        print(f"stack B={n}: {out[f'B{n}_stack_us']:.4f} us/state vs {nbig} alone "
              f"{out[f'B{n}_{nbig}_alone_us']:.4f}; vs members {err:.1e}", flush=True)
    return out


def plot(res, path):
    """Bars per robot and batch (log scale): µs per state of each entry point measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = [(f"{n}\n{k}", row) for n, r in res["robots"].items() for k, row in r.items() if isinstance(row, dict)]
    keys = sorted({k[:-3] for _, row in groups for k in row if k.endswith("_us")})
    fig, ax = plt.subplots(figsize=(12, 4.5))
    w = 0.8 / max(1, len(keys))
    for j, k in enumerate(keys):
        ax.bar(np.arange(len(groups)) + j * w, [row.get(k + "_us", np.nan) for _, row in groups], w, label=k)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - w / 2)
    ax.set_xticklabels([g for g, _ in groups], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("µs per state")
    ax.set_title(f"jaxdyn on {res['device']} ({res['backend']}, jax {res['jax']})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
