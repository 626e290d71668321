"""Compile time: the first call of jaxdyn's programs, each in a fresh process (nothing cached in
memory; JAX's persistent cache off unless a case turns it on), and the wall time of the three
command-line tools cold and with the persistent compilation cache warm.

Usage: python benchmarks/bench_compile.py [--cases all|none|NAME,...] [--repeat 1]
         [--out benchmarks/results/compile.json] [--label after] [--plot LABEL,...] [--png PATH]

Cases (seconds of the first call, compile included; ``first_call`` the one-state public
functions on talos_reduced, each its own process):

* ``aba``, ``vmap_aba``, ``aba_derivatives`` on panda and talos_reduced: ``jax.jit(f)`` of one
  state, ``jax.jit(jax.vmap(f))`` of 4096 states;
* ``first_call``: the one-state public functions of ``FIRST_CALL`` on talos_reduced, called as a
  user calls them (no ``jax.jit`` around them: each compiles its own program on its first call),
  ``forward_dynamics`` with each method, and ``first_call_constrained_<method>``: one eager
  ``constrained_forward_dynamics`` of anymal_c on four point feet per constrained method;
* ``build_four_bar``, ``build_quadruped``: the built-in closed mechanisms (``jaxdyn.mechanisms``),
  which project their start pose onto the constraints and check it;
* ``rollout_grad``: ``jax.jit(jax.grad(loss))`` of a 100-step RK4 rollout of the PUMA;
* ``quadruped_<method>``: a 2 s RK4 rollout (dt 2 ms) of anymal_c on four point feet holding
  its stance under a joint PD law (Kp 300, Kd 10), for each constrained method;
* ``stack``: ``jax.jit(jax.vmap(aba))`` over 4096 lanes of a stack of panda, anymal_c,
  talos_reduced and g1;
* ``cli_<tool>_cold`` / ``cli_<tool>_warm``: ``jaxdyn simulate|identify|trajopt`` with its
  default config, an empty persistent cache, then the same cache again (``--repeat N``: N
  such pairs, each with a new cache; the fastest cold and the fastest warm run are kept, as
  the minimum of N first calls is for the other cases).

The script runs against whatever ``jaxdyn`` is importable (``PYTHONPATH`` picks a checkout),
so the same file measures a commit before and after a change.  Every case runs as ``python -c``
or ``python -m jaxdyn.cli`` in the temporary folder: the current folder comes first on
``sys.path``, and from a checkout's root it would import that checkout instead.  Writes JSON
(appending the label's results) and a PNG plot.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

ROBOTS = {"panda": ("panda_description/urdf/panda.urdf", False),
          "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True),
          "talos_reduced": ("talos_data/robots/talos_reduced.urdf", True),
          "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True)}

PRELUDE = """
import os, sys, time, warnings
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import jaxdyn
warnings.simplefilter("ignore")
from jaxdyn.io.named import example_robot_data_dir
ROBOTS = %r
def load(name):
    rel, fb = ROBOTS[name]
    return jaxdyn.load_urdf(os.path.join(example_robot_data_dir(), rel), floating_base=fb)
def state(m, B=None, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), B or 1)
    Q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(seed)
    V, T = jnp.asarray(r.normal(size=(B or 1, m.nv))), jnp.asarray(r.normal(size=(B or 1, m.nv)))
    jax.block_until_ready((Q, V, T))
    return (Q, V, T) if B else (Q[0], V[0], T[0])
def first(f, *a):
    t0 = time.perf_counter()
    jax.block_until_ready(f(*a))
    return time.perf_counter() - t0
""" % (ROBOTS,)

CASES = {}


def case(name, body):
    CASES[name] = PRELUDE + body


for r in ("panda", "talos_reduced"):
    case(f"aba_{r}", f"m = load({r!r}); q, v, t = state(m)\nprint(first(jax.jit(jaxdyn.aba), m, q, v, t))")
    case(f"vmap_aba_{r}", f"m = load({r!r}); Q, V, T = state(m, 4096)\n"
         "print(first(jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))), m, Q, V, T))")
    case(f"aba_derivatives_{r}", f"m = load({r!r}); q, v, t = state(m)\nprint(first(jax.jit(jaxdyn.aba_derivatives), m, q, v, t))")

FIRST_CALL = {
    "aba": "jaxdyn.aba(m, q, v, t)", "rnea": "jaxdyn.rnea(m, q, v, t)", "crba": "jaxdyn.crba(m, q)",
    "minv": "jaxdyn.minv(m, q)", "forward_dynamics_crba": "jaxdyn.forward_dynamics(m, q, v, t, method='crba')",
    "aba_derivatives": "jaxdyn.aba_derivatives(m, q, v, t)", "rnea_derivatives": "jaxdyn.rnea_derivatives(m, q, v, t)",
    "frame_jacobian": "jaxdyn.frame_jacobian(m, q, 'left_sole_link')", "frame_pose": "jaxdyn.frame_pose(m, q, 'left_sole_link')",
    "kinetic_energy": "jaxdyn.kinetic_energy(m, q, v)", "centroidal_momentum": "jaxdyn.centroidal_momentum(m, q, v)",
    "integrate": "jaxdyn.integrate(m, q, v)", "forward_kinematics": "jaxdyn.forward_kinematics(m, q)",
    "grad_aba": "jax.grad(lambda t: jnp.sum(jaxdyn.aba(m, q, v, t) ** 2))(t)",
    "operator_fd1": "jaxdyn.operators.operator_fd1(m, q, v, t)", "udut_forward": "jaxdyn.saha.udut_forward(m, q, t)",
    "log_cholesky_parameters": "jaxdyn.log_cholesky_parameters(m)",
    "bias_forces": "jaxdyn.bias_forces(m, q, v)", "gravity_torques": "jaxdyn.gravity_torques(m, q)",
    "joint_wrenches": "jaxdyn.joint_wrenches(m, q, v, t)", "virtual_work": "jaxdyn.virtual_work(m, q, v, t)",
    "center_of_mass": "jaxdyn.center_of_mass(m, q)", "potential_energy": "jaxdyn.potential_energy(m, q)",
    "spatial_momentum": "jaxdyn.spatial_momentum(m, q, v)", "frame_poses": "jaxdyn.frame_poses(m, q)",
    "frame_velocity": "jaxdyn.frame_velocity(m, q, v, 'left_sole_link')",
    "frame_acceleration": "jaxdyn.frame_acceleration(m, q, v, t, 'left_sole_link')",
    "difference": "jaxdyn.difference(m, q, q)", "random_configuration": "jaxdyn.random_configuration(m, jax.random.PRNGKey(1))",
    "inverse_kinematics": "jaxdyn.inverse_kinematics(m, 'left_sole_link', *jaxdyn.frame_pose(m, q, 'left_sole_link'), "
                          "jaxdyn.neutral(m))[0]",
}
FIRST_CALL.update({f"forward_dynamics_{k}": f"jaxdyn.forward_dynamics(m, q, v, t, method={k!r})"
                   for k in ("aba", "udut", "operator_fd2", "operator_fd3", "operator_fd4", "virtual_work")})
for fn, expr in FIRST_CALL.items():
    case(f"first_call_{fn}", f"m = load('talos_reduced'); q, v, t = state(m)\nprint(first(lambda: {expr}))")

QUADRUPED = """m = load("anymal_c")
q0 = np.array(jaxdyn.neutral(m)); q0[2] = 0.6
ls = jaxdyn.legged_system(m, q0, ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"], contact="point")
sys_ = ls if %r in ("lilly_orin", "rccfd") else ls.closed"""
"""anymal_c standing on four point feet: the LeggedSystem for Lilly-Orin and the RCCFD, its
ClosedModel for Schur and KKT; formatted with the method name."""

# one eager call of constrained_forward_dynamics, anymal_c on four point feet, per method
for method in ("lilly_orin", "rccfd", "schur", "kkt"):
    case(f"first_call_constrained_{method}", f"""
{QUADRUPED % method}
z = np.zeros(m.nv)
print(first(lambda: jaxdyn.constrained_forward_dynamics(sys_, q0, z, z, method={method!r}).qdd))
""")

for builder in ("four_bar", "quadruped"):
    case(f"build_{builder}", f"print(first(lambda: jaxdyn.mechanisms.{builder}()[1]))")

case("rollout_grad", """
m = jaxdyn.robots.puma560()
U = jnp.asarray(np.random.default_rng(0).normal(size=(100, 6)))
def loss(U):
    tr = jaxdyn.rollout(m, jnp.zeros(6), jnp.zeros(6), U, dt=0.01, steps=100, stepper="rk4")
    return jnp.sum(tr.q[-1] ** 2)
print(first(jax.jit(jax.grad(loss)), U))
""")

for method in ("lilly_orin", "rccfd", "schur", "kkt"):
    case(f"quadruped_{method}", f"""
{QUADRUPED % method}
qj = jnp.asarray(q0[7:])
hold = lambda t, q, qd: jnp.concatenate([jnp.zeros(6, q.dtype), 300.0 * (qj - q[7:]) - 10.0 * qd[6:]])
print(first(lambda: jaxdyn.rollout(sys_, q0, np.zeros(m.nv), hold, dt=0.002, steps=1000, stepper="rk4",
                                   method={method!r}).q))
""")

case("stack", """
ms = [load(n) for n in ("panda", "anymal_c", "talos_reduced", "g1")]
st = jaxdyn.stack(ms)
if hasattr(st, "lanes"):
    big = st.lanes(np.repeat(np.arange(4), 1024))
    qs = [state(m, 1024, j) for j, m in enumerate(ms)]
    Q = jnp.concatenate([st.q(j, x[0]) for j, x in enumerate(qs)])
    V = jnp.concatenate([st.v(j, x[1]) for j, x in enumerate(qs)])
else:                                        # the pad_state API of earlier versions
    big = jax.tree_util.tree_map(lambda a: a[np.repeat(np.arange(4), 1024)], st)
    qs = [state(m, 1024, j) for j, m in enumerate(ms)]
    Q = jnp.concatenate([jaxdyn.pad_state(m, x[0], st.nq) for m, x in zip(ms, qs)])
    V = jnp.concatenate([jaxdyn.pad_state(m, x[1], st.nv) for m, x in zip(ms, qs)])
print(first(jax.jit(jax.vmap(jaxdyn.aba)), big, Q, V, V))
""")


def run_case(code, env=None, timeout=1800):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})}, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1][:300] if r.stderr.strip() else f"exit {r.returncode}"}
    return {"s": float(r.stdout.strip().splitlines()[-1])}


def run_cli(tool, cache_dir, out_dir):
    env = {**os.environ, "JAXDYN_CACHE_DIR": cache_dir, "JAX_COMPILATION_CACHE_DIR": cache_dir}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "jaxdyn.cli", tool, "--out", out_dir], capture_output=True, text=True,
                       env=env, timeout=3600, cwd=tempfile.gettempdir())
    dt = time.perf_counter() - t0
    return {"s": dt} if r.returncode == 0 else {"s": dt, "error": (r.stderr or r.stdout).strip()[-300:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="all")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "compile.json"))
    ap.add_argument("--plot", default="", help="comma-separated labels to plot (default: every label in the "
                    "JSON); with --cases none only redraws the plot")
    ap.add_argument("--png", default=None, help="the plot's path (default: --out with .png)")
    args = ap.parse_args()
    shown = [x for x in args.plot.split(",") if x]
    png = args.png or args.out.replace(".json", ".png")
    names = list(CASES) + [f"cli_{t}" for t in ("simulate", "identify", "trajopt")]
    if args.cases != "all":
        names = [n for n in names if any(n.startswith(c) for c in args.cases.split(","))]
    if args.cases == "none":
        with open(args.out) as fh:
            plot(json.load(fh), png, shown)
        return
    res = {}
    for name in names:
        if name.startswith("cli_"):
            tool = name[4:]
            colds, warms = [], []
            for _ in range(args.repeat):                 # each repeat: an empty cache, then the same again
                tmp = tempfile.mkdtemp()
                try:
                    colds.append(run_cli(tool, os.path.join(tmp, "cache"), os.path.join(tmp, "out1")))
                    warms.append(run_cli(tool, os.path.join(tmp, "cache"), os.path.join(tmp, "out2")))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            cold, warm = (min(r, key=lambda x: ("error" in x, x["s"])) for r in (colds, warms))
            res[name + "_cold"], res[name + "_warm"] = cold, warm
            print(f"{name}: cold {cold}, warm {warm}", flush=True)
            continue
        runs = [run_case(CASES[name]) for _ in range(args.repeat)]
        ok = [r["s"] for r in runs if "s" in r]
        res[name] = {"s": min(ok)} if ok else runs[0]
        print(f"{name}: {res[name]}", flush=True)
    import jax
    data = {}
    if os.path.exists(args.out):
        with open(args.out) as fh:
            data = json.load(fh)
    data[args.label] = {"jax": jax.__version__, "cpus": os.cpu_count(), "results": res}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(data, fh, indent=1)
    plot(data, png, shown)
    print("wrote", args.out)


def plot(data, path, labels=()):
    """Horizontal bars: seconds per case, one bar per label (``labels``, default all)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = list(labels) or list(data)
    cases = sorted({c for lab in labels for c in data[lab]["results"]})
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(cases) + 1.5))
    h = 0.8 / max(len(labels), 1)
    have = [[lab for lab in labels if "s" in data[lab]["results"].get(c, {})] for c in cases]
    colors = dict(zip(labels, plt.rcParams["axes.prop_cycle"].by_key()["color"] * len(labels)))
    for lab in labels:              # a case's bars centred on its tick, whichever labels measured it
        at = [(i + (hv.index(lab) - (len(hv) - 1) / 2) * h, data[lab]["results"][c]["s"])
              for i, (c, hv) in enumerate(zip(cases, have)) if lab in hv]
        ax.barh([y for y, _ in at], [x for _, x in at], h, label=lab, color=colors[lab])
    ax.set_yticks(range(len(cases)), cases, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (first call, compile included; CLI: whole command)")
    ax.set_title("jaxdyn compile and first-call times (each case a fresh process)", pad=12 + 14 * ((len(labels) + 1) // 2))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)   # above the bars
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
