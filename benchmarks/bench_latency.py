"""Where the latency of one call goes: for ``jax.jit(f)`` of one state (f = aba, rnea, crba, and
a no-op with the same arguments), the time of a call with synchronous CPU dispatch and the
number of XLA:CPU kernels it runs (each fusion, copy or other instruction that the runtime
executes, counted over every iteration of the sweeps' loops), on panda, anymal_c,
talos_reduced and g1.  The no-op's time is the dispatch of a call with these arguments.

The kernels are counted from a ``jax.profiler`` trace of a few calls: an event whose name is
an instruction of the compiled program (``compiled.as_text()``), not a ``while``.  A least-
squares line latency = a + b * kernels over every robot and algorithm (the no-op left out)
gives the fixed cost of a call (a) and the cost of a kernel (b).

Each round runs in a fresh process pinned to core 0 (``--rounds`` of them, and one more that
counts the kernels); a latency is the least over the rounds of the 10th percentile of 3000
calls.  Writes JSON and a PNG plot.

Usage: python benchmarks/bench_latency.py [--rounds 3] [--robots panda,anymal_c,talos_reduced,g1]
         [--out benchmarks/results/latency.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np

from bench_engine import pin_model  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from timing import alternate  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = 3000


def kernels_per_call(compiled, call, n=20):
    """XLA:CPU instructions run per call of ``call()``, from a profiler trace of n calls."""
    import glob
    import gzip
    import tempfile
    import jax
    names = set()
    for line in compiled.as_text().splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        op = m and re.search(r"\b([a-z][\w\-]*)\(", line[m.end():])
        if op and op.group(1) != "while":
            names.add(m.group(1))
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            for _ in range(n):
                call()
        events = json.load(gzip.open(glob.glob(os.path.join(d, "**", "*.trace.json.gz"), recursive=True)[0]))
    return sum(e.get("ph") == "X" and e["name"] in names for e in events["traceEvents"]) / n


def worker(args):
    """{robot/function: p10 latency (µs)} of this process, or with ``--count`` {robot/function:
    kernels per call} (a profiler session slows the calls timed after it, so a process does one
    or the other)."""
    import time
    import warnings
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    import jax.numpy as jnp
    import jaxdyn
    warnings.simplefilter("ignore")
    fs = {"noop": lambda m, q, v, t: v + t, "aba": jaxdyn.aba, "rnea": jaxdyn.rnea,
          "crba": lambda m, q, v, t: jaxdyn.crba(m, q)}
    out = {}
    for name in args.robots.split(","):
        path, fb, _ = pin_model(name)
        m = jaxdyn.load_urdf(path, floating_base=fb)
        q = jaxdyn.neutral(m)
        v, t = jnp.ones(m.nv), jnp.ones(m.nv)
        for fn, f in fs.items():
            g = jax.jit(f)
            call = lambda: g(m, q, v, t).block_until_ready()      # noqa: E731
            call()
            if args.count:
                out[f"{name}/{fn}"] = kernels_per_call(g.lower(m, q, v, t).compile(), call)
                continue
            ts = np.empty(CALLS)
            for i in range(CALLS):
                t0 = time.perf_counter()
                call()
                ts[i] = time.perf_counter() - t0
            out[f"{name}/{fn}"] = float(np.percentile(ts, 10) * 1e6)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--robots", default="panda,anymal_c,talos_reduced,g1")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latency.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    os.sched_setaffinity(0, {0})            # the workers inherit core 0
    us = alternate(__file__, ["--robots", args.robots], rounds=args.rounds)["after"]
    kernels = alternate(__file__, ["--robots", args.robots, "--count"], rounds=1)["after"]
    res = {k: {"us": us[k], "kernels": kernels[k]} for k in us}
    algs = [k for k in res if not k.endswith("/noop")]
    x = np.array([res[k]["kernels"] for k in algs])
    y = np.array([res[k]["us"] for k in algs])
    b, a = np.polyfit(x, y, 1)
    import jax
    import datetime
    doc = {"date": datetime.date.today().isoformat(), "jax": jax.__version__, "cpus": os.cpu_count(),
           "rounds": args.rounds, "calls": CALLS, "results": res,
           "fit": {"fixed_us": float(a), "per_kernel_ns": float(b * 1e3)}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for k, r in res.items():
        print(f"{k:24s} {r['us']:8.1f} us  {r['kernels']:7.0f} kernels")
    print(f"fit: {a:.1f} us + {b * 1e3:.0f} ns per kernel")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for fn, mk in (("noop", "x"), ("aba", "o"), ("rnea", "s"), ("crba", "^")):
        ks = [k for k in res if k.endswith("/" + fn)]
        ax.scatter([res[k]["kernels"] for k in ks], [res[k]["us"] for k in ks], marker=mk, label="no-op (dispatch)" if fn == "noop" else fn)
        for k in ks if fn != "noop" else ():
            ax.annotate(k.split("/")[0], (res[k]["kernels"], res[k]["us"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    xs = np.linspace(0, x.max() * 1.05, 2)
    ax.plot(xs, a + b * xs, "k--", lw=1, label=f"fit: {a:.0f} µs + {b * 1e3:.0f} ns x kernels")
    ax.set_xlabel("XLA:CPU kernels run per call")
    ax.set_ylabel("latency of one jax.jit(f) call (µs, p10)")
    ax.set_title("One-state latency against kernels per call (f64, one core)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out.replace(".json", ".png"), dpi=120)


if __name__ == "__main__":
    main()
