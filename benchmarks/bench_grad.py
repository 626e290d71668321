"""Derivative throughput: µs per state for jaxdyn's dynamics derivatives vs Pinocchio.

Usage: python benchmarks/bench_grad.py [--robots panda,talos_reduced] [--batches 1,64,4096]
         [--host-devices 2] [--sync-dispatch] [--tune-host-allocator] [--forward-only]
         [--out benchmarks/results/grad.json]

Per robot (f64, one JAX CPU device unless stated, Pinocchio in the same run on one core):

* ``aba_derivatives`` / ``rnea_derivatives`` (Carpentier-Mansard sweeps; B = 1: one jitted
  call, B > 1: ``derivatives_batch``, batch-last chunks (its default size); at the largest B also
  ``vmap`` of the per-state function, and ``derivatives_batch`` split over all
  ``--host-devices``, default one per core; and at the largest B with ``out=`` the previous
  call's result, whose buffers are reused, after :data:`OUT_WARMUP` untimed calls; at the
  largest B the least of two medians) and the autodiff reference
  (``method="autodiff"``, B = 64 only: it is ~50x slower), with compile times;
* ``vmap`` of the per-state derivative functions inside ``jaxdyn.jit`` (compiled with
  ``jaxdyn.CPU_OPTIONS``) and inside a plain ``jax.jit`` (XLA's default options);
* one reverse-mode gradient of a scalar of qdd (``vmap(grad)``) through ``jaxdyn.aba`` (its
  implicit derivative rule) and through ``aba_unwrapped`` (autodiff through the passes);
* the forward pass at the largest B: ``vmap(aba)`` (its custom_vmap rule runs the batch-last
  kernels; inside a plain ``jax.jit`` and inside ``jaxdyn.jit``), vmap of the
  per-state passes (``aba_unwrapped``) and ``aba_batch`` (all but ``aba_unwrapped`` timed
  alternately, the least of 3 medians);
* a ``jaxdyn.stack`` of all the robots (padded; each lane with its own model) under
  ``vmap(aba)`` vs the same batch of its largest member alone, both in a plain ``jax.jit`` and
  in ``jaxdyn.jit``;
* the forward rows and the stack again in a subprocess started with
  ``XLA_FLAGS=jaxdyn.CPU_XLA_FLAGS`` (key ``cpu_xla_flags``; ``--forward-only`` is that run);
* Pinocchio: ``computeABADerivatives`` / ``computeRNEADerivatives`` / ``aba`` per call.

``--tune-host-allocator`` first calls ``jaxdyn.tune_host_allocator()`` (glibc keeps freed
memory for reuse, so a batch's (B, nv, nv) outputs are not written into freshly faulted
pages; ``bench_allocator.py`` compares the two settings alternately in one process).
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
from timing import timeit  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--batches", default="1,64,4096")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "grad.json"))
    ap.add_argument("--sync-dispatch", action="store_true",
                    help="jax_cpu_enable_async_dispatch=False: the calling thread runs one-device programs")
    ap.add_argument("--host-devices", type=int, default=os.cpu_count() or 1,
                    help="JAX CPU devices (one per core); derivatives_batch is measured on 1 and on all")
    ap.add_argument("--tune-host-allocator", action="store_true",
                    help="call jaxdyn.tune_host_allocator() first (glibc keeps freed memory for reuse)")
    ap.add_argument("--forward-only", action="store_true",
                    help="only the forward-pass rows and the stack (what the XLA_FLAGS run measures)")
    args = ap.parse_args()

    import jax
    jax.config.update("jax_num_cpu_devices", args.host_devices)
    jax.config.update("jax_cpu_enable_async_dispatch", not args.sync_dispatch)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import pinocchio as pin
    import jaxdyn
    from jaxdyn.dynamics import aba_unwrapped
    tuned = jaxdyn.tune_host_allocator() if args.tune_host_allocator else False

    batches = [int(b) for b in args.batches.split(",")]
    Bmax = max(batches)
    res = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "jax": jax.__version__, "pinocchio": pin.__version__, "dtype": "f64",
           "async_dispatch": not args.sync_dispatch, "host_allocator_tuned": tuned, "robots": {}}
    models = {}

    def compiled(fn, *a):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*a))
        return time.perf_counter() - t0

    for name in args.robots.split(","):
        m, pm = load_pair(name)
        models[name] = (m, pm)
        Qn, Vn, Tn = random_states(pm, Bmax)
        Q, V, T = jnp.asarray(Qn), jnp.asarray(Vn), jnp.asarray(Tn)
        row = {"nv": m.nv, "nb": m.nb}
        if args.forward_only:
            res["robots"][name] = dict(row, **forward_rows(m, Q, V, T))
            print(name, json.dumps({k: round(v, 2) for k, v in res["robots"][name].items()}), flush=True)
            continue

        pd = pm.createData()
        n = min(200, Bmax)
        for key, call in (("pin_aba_derivatives_us", lambda i: pin.computeABADerivatives(pm, pd, Qn[i], Vn[i], Tn[i])),
                          ("pin_rnea_derivatives_us", lambda i: pin.computeRNEADerivatives(pm, pd, Qn[i], Vn[i], Tn[i])),
                          ("pin_aba_us", lambda i: pin.aba(pm, pd, Qn[i], Vn[i], Tn[i]))):
            row[key] = timeit(lambda: [call(i) for i in range(n)]) / n * 1e6

        for fn in ("aba", "rnea"):
            single = jaxdyn.aba_derivatives if fn == "aba" else jaxdyn.rnea_derivatives   # top level: jaxdyn's jit
            for B in batches:
                if B == 1:          # the state sliced once: Q[0] in the timed call is a dispatch of its own
                    q0, v0, t0 = Q[0], V[0], T[0]
                    f = lambda q0=q0, v0=v0, t0=t0: single(m, q0, v0, t0)
                else:
                    f = lambda B=B: jaxdyn.derivatives_batch(m, Q[:B], V[:B], T[:B], fn=fn, devices=1)
                row[f"{fn}_derivatives_compile_s_B{B}"] = compiled(f)
                row[f"{fn}_derivatives_us_B{B}"] = min(timeit(lambda: jax.block_until_ready(f()), min_reps=7)
                                                       for _ in range(2 if B == Bmax else 1)) / B * 1e6
            into = derivatives_into(m, Q, V, T, fn)     # each call writes into the previous result
            for _ in range(OUT_WARMUP):
                into()
            row[f"{fn}_derivatives_out_us_B{Bmax}"] = min(timeit(into, min_reps=7) for _ in range(2)) / Bmax * 1e6
            del into
            nd = jax.device_count()
            if nd > 1:
                f = lambda: jaxdyn.derivatives_batch(m, Q, V, T, fn=fn, devices=nd)
                compiled(f)
                row[f"{fn}_derivatives_us_B{Bmax}_{nd}dev"] = timeit(lambda: jax.block_until_ready(f())) / Bmax * 1e6
            for label, jit in (("", jaxdyn.jit), ("_plain_jit", jax.jit)):   # jaxdyn.jit: CPU_OPTIONS
                vf = jit(jax.vmap(single, (None, 0, 0, 0)))
                f = lambda: vf(m, Q, V, T)
                row[f"{fn}_derivatives_vmap{label}_compile_s_B{Bmax}"] = compiled(f)
                row[f"{fn}_derivatives_vmap{label}_us_B{Bmax}"] = timeit(lambda: jax.block_until_ready(f())) / Bmax * 1e6
            f = lambda: jaxdyn.derivatives_batch(m, Q[:64], V[:64], T[:64], fn=fn, chunk=64, method="autodiff",
                                                 devices=1)
            row[f"{fn}_derivatives_autodiff_compile_s_B64"] = compiled(f)
            row[f"{fn}_derivatives_autodiff_us_B64"] = timeit(lambda: jax.block_until_ready(f())) / 64 * 1e6

        w = jnp.asarray(np.random.default_rng(1).normal(size=m.nv))
        for label, aba_fn in (("implicit", jaxdyn.aba), ("unwrapped", aba_unwrapped)):
            g = jax.jit(jax.vmap(jax.grad(lambda q, v, t: aba_fn(m, q, v, t) @ w, argnums=(0, 1, 2))))
            B = min(Bmax, 1024)
            row[f"grad_aba_{label}_compile_s"] = compiled(g, Q[:B], V[:B], T[:B])
            row[f"grad_aba_{label}_us_B{B}"] = timeit(lambda: jax.block_until_ready(g(Q[:B], V[:B], T[:B]))) / B * 1e6

        row.update(forward_rows(m, Q, V, T))
        res["robots"][name] = row
        print(name, json.dumps({k: round(v, 2) for k, v in row.items()}), flush=True)
        jax.clear_caches()

    if len(models) > 1:
        res["stack"] = stack_rows(models, Bmax)
        print("stack", res["stack"], flush=True)
    if not args.forward_only:
        res["cpu_xla_flags"] = flags_run(args)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if not args.forward_only:
        plot(res, args.out.replace(".json", ".png"), Bmax)


OUT_WARMUP = 8
"""Untimed calls with ``out=`` before its timing: the first calls after the first result ran
30-40 % slower (talos_reduced, B = 4096: a first median of 34.7 µs per state, then 24.4-25.8),
which a single median right after the first call caught (45.8 and 50.2 in two runs, against
25.9 alternated in ``bench_allocator.py``)."""

ROUNDS = 3
"""Alternated timing rounds of :func:`forward_rows` and :func:`stack_rows`."""


def forward_rows(m, Q, V, T):
    """The forward pass on the batch (Q, V, T) of model m, µs per state: ``vmap(aba)`` in a
    plain ``jax.jit`` and in ``jaxdyn.jit``, vmap of the per-state passes (``aba_unwrapped``,
    timed once: ~10x slower), ``aba_batch``.  The other three are timed alternately,
    :data:`ROUNDS` medians each, and each keeps its least (as :func:`stack_rows`)."""
    import jax
    import jaxdyn
    from jaxdyn.dynamics import aba_unwrapped
    B = Q.shape[0]
    fns = {key: (lambda va=jit(jax.vmap(fn, (None, 0, 0, 0))): va(m, Q, V, T))
           for key, jit, fn in (("vmap_aba", jax.jit, jaxdyn.aba), ("vmap_aba_jaxdyn_jit", jaxdyn.jit, jaxdyn.aba))}
    fns["aba_batch"] = lambda: jaxdyn.aba_batch(m, Q, V, T, devices=1)
    runs = {key: [] for key in fns}
    for _ in range(ROUNDS):
        for key, f in fns.items():
            runs[key].append(timeit(lambda: jax.block_until_ready(f())))
    row = {f"{key}_us_B{B}": min(t) / B * 1e6 for key, t in runs.items()}
    vu = jax.jit(jax.vmap(aba_unwrapped, (None, 0, 0, 0)))
    row[f"vmap_aba_unwrapped_us_B{B}"] = timeit(lambda: jax.block_until_ready(vu(m, Q, V, T))) / B * 1e6
    return row





def stack_rows(models, B):
    """``vmap(aba)`` over a ``jaxdyn.stack`` of all ``models`` (B states, B / len(models) per
    member, each lane with its own model) against the same batch of the largest member alone,
    both in a plain ``jax.jit`` and in ``jaxdyn.jit``, for two layouts of the lanes: grouped
    by member (keys without a suffix; every chunk but a few holds one member, which runs one
    model's kernel) and interleaved (``_interleaved``: the lanes in a random order, which
    ``vmap(aba)`` sorts by member so that most chunks again hold one member).  Each time is the least of :data:`ROUNDS`
    medians, the stack and the member alone alternated (single medians of the same program
    varied by up to 30 % on the shared 2-core machine)."""
    import jax
    import jax.numpy as jnp
    import jaxdyn
    ms = [m for m, _ in models.values()]
    big = max(ms, key=lambda m: m.nv)
    st = jaxdyn.stack(ms)
    per = B // len(ms)
    Qs, Vs, Ts = [], [], []
    for i, (m, pm) in enumerate(models.values()):
        q, v, t = random_states(pm, per, seed=i)
        Qs.append(np.stack([np.asarray(jaxdyn.pad_state(m, x, st.nq)) for x in q]))
        Vs.append(np.pad(v, ((0, 0), (0, st.nv - m.nv))))
        Ts.append(np.pad(t, ((0, 0), (0, st.nv - m.nv))))
    member = np.repeat(np.arange(len(ms)), per)
    n = len(member)
    name_big = [k for k, (m, _) in models.items() if m is big][0]
    Qb, Vb, Tb = (jnp.asarray(x) for x in random_states(models[name_big][1], n))
    out = {"members": list(models), "B": n}
    for layout, order in (("", np.arange(n)), ("_interleaved", np.random.default_rng(0).permutation(n))):
        stb = jax.tree_util.tree_map(lambda a: a[member[order]], st)
        Q, V, T = (jnp.asarray(np.concatenate(x)[order]) for x in (Qs, Vs, Ts))
        for label, jit in (("", jax.jit), ("_jaxdyn_jit", jaxdyn.jit)):
            va, vb = jit(jax.vmap(jaxdyn.aba)), jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))
            runs = [(timeit(lambda: jax.block_until_ready(va(stb, Q, V, T))),
                     timeit(lambda: jax.block_until_ready(vb(big, Qb, Vb, Tb)))) for _ in range(ROUNDS)]
            t_st, t_big = (min(r[i] for r in runs) / n * 1e6 for i in (0, 1))
            out.update({f"vmap_aba_stack{layout}{label}_us": t_st,
                        f"vmap_aba_{name_big}_alone{layout}{label}_us": t_big,
                        f"ratio{layout}{label}": t_st / t_big})
    return out


def flags_run(args):
    """The forward rows and the stack again in a process started with
    ``XLA_FLAGS=jaxdyn.CPU_XLA_FLAGS`` (a plain ``jax.jit`` then gets jaxdyn's options)."""
    import subprocess
    import tempfile
    import jaxdyn
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "flags.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--forward-only", "--robots", args.robots,
               "--batches", args.batches, "--host-devices", str(args.host_devices), "--out", out]
        cmd += ["--sync-dispatch"] if args.sync_dispatch else []
        cmd += ["--tune-host-allocator"] if args.tune_host_allocator else []
        subprocess.run(cmd, check=True, env=dict(os.environ, XLA_FLAGS=jaxdyn.CPU_XLA_FLAGS))
        with open(out) as f:
            sub = json.load(f)
    return {"XLA_FLAGS": jaxdyn.CPU_XLA_FLAGS, "robots": sub["robots"], "stack": sub.get("stack")}


def plot(res, path, Bmax):
    """Bars per robot (log scale): Pinocchio vs jaxdyn derivative costs per state."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["robots"])
    series = [("Pinocchio computeABADerivatives", "pin_aba_derivatives_us"),
              (f"aba_derivatives (analytic, B={Bmax})", f"aba_derivatives_us_B{Bmax}"),
              (f"aba_derivatives (analytic, B={Bmax}, out=previous)", f"aba_derivatives_out_us_B{Bmax}"),
              (f"vmap(aba_derivatives) (B={Bmax})", f"aba_derivatives_vmap_us_B{Bmax}"),
              (f"aba_derivatives (analytic, B={Bmax}, all host devices)",
               ([k for k in res["robots"][names[0]] if k.startswith(f"aba_derivatives_us_B{Bmax}_")] or [None])[0]),
              ("Pinocchio computeRNEADerivatives", "pin_rnea_derivatives_us"),
              (f"rnea_derivatives (analytic, B={Bmax})", f"rnea_derivatives_us_B{Bmax}"),
              ("aba_derivatives (analytic, B=1)", "aba_derivatives_us_B1"),
              ("aba_derivatives (autodiff, B=64)", "aba_derivatives_autodiff_us_B64"),
              ("grad through aba (implicit rule)", [k for k in res["robots"][names[0]] if k.startswith("grad_aba_implicit_us")][0]),
              ("grad through aba_unwrapped", [k for k in res["robots"][names[0]] if k.startswith("grad_aba_unwrapped_us")][0])]
    series = [(lab, key) for lab, key in series                  # rows of the batches measured
              if key is not None and all(key in res["robots"][n] for n in names)]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    wdt = 0.8 / len(series)
    for j, (lab, key) in enumerate(series):
        ax.bar(np.arange(len(names)) + j * wdt, [res["robots"][n][key] for n in names], wdt, label=lab)
    ax.set_xticks(np.arange(len(names)) + 0.4 - wdt / 2)
    ax.set_xticklabels(names)
    ax.set_yscale("log")
    ax.set_ylabel("µs per state (f64; one core unless stated)")
    ax.legend(fontsize=7)
    ax.set_title("Dynamics derivatives: jaxdyn vs Pinocchio")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
