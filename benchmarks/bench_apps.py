"""Applications: cost of one trajectory-optimization step vs the number of multi-starts,
compile times (plain scan, checkpointed chunks, the whole L-BFGS program), and
identification time vs data size.

Usage: python benchmarks/bench_apps.py [--starts 1,4,16,64,256,1024] [--samples 250,1000,4000]
         [--out benchmarks/results/apps.json]

* Trajopt configs ``trajopt_puma_p2p`` (PUMA, 100 Euler steps, acceleration parametrization)
  and ``trajopt_double_pendulum`` (150 steps, torque limits): one optimizer step is one
  ``value_and_grad`` of the single-shooting objective (what an Adam step costs; an L-BFGS
  step adds its line-search evaluations), timed as ``jit(vmap(value_and_grad))`` over K starts.
* Compile times of that gradient with the plain scan and with ``rollout(chunk=10)``
  (``jax.checkpoint``-ed chunks), and of the full ``optimize`` program (4 rounds x 30 L-BFGS
  steps in one ``lax.scan``).
* Identification on the PUMA: stacked regressor (vmap of reverse mode), base parameters,
  least squares and 2000 L-BFGS steps of the consistent estimator, for N samples.

Writes JSON and a PNG plot.
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
from timing import timeit  # noqa: E402


def _ints(s):
    return [int(x) for x in s.split(",") if x]


def trajopt_cases():
    import jax.numpy as jnp

    import jaxdyn
    from jaxdyn.apps import trajopt as to
    from jaxdyn.apps.trajopt_cli import load

    cases = {}
    for name in ("trajopt_puma_p2p", "trajopt_double_pendulum"):
        cfg = load(name)
        p = cfg["problem"]
        m = getattr(jaxdyn.robots, cfg["robot"]["name"])()
        qT = jnp.asarray(p["q_final"])
        steps = int(round(p["T"] / p["dt"]))
        prob = to.problem(m, jnp.asarray(p["q0"]), jnp.zeros(m.nv), p["dt"], steps,
                          lambda t, q, qd, u: jnp.sum(u ** 2),
                          terminal_constraint=lambda q, qd, qT=qT: jnp.concatenate([q - qT, qd]),
                          tau_limit=p.get("tau_limit"), stepper=p["stepper"], parametrization=p["parametrization"])
        cases[name] = (prob, cfg)
    return cases


def bench_trajopt(starts):
    import jax
    import jax.numpy as jnp

    from jaxdyn.apps import trajopt as to
    from jaxdyn.integrators.rollout import rollout

    out = {}
    for name, (prob, cfg) in trajopt_cases().items():
        def obj(Z, chunk=None):
            tr = rollout(prob.model, prob.q0, prob.qd0, to.controls(prob, Z), prob.dt, prob.steps,
                         stepper=prob.stepper, chunk=chunk)
            c = prob.terminal_constraint(tr.q[-1], tr.qd[-1])
            return to.integrated_running_cost(prob, tr) + 1e3 * jnp.dot(c, c)

        Z = jnp.zeros((prob.steps, prob.nv))
        row = {"steps": prob.steps, "nv": prob.nv, "per_step_ms": {}}
        for label, chunk in (("plain_scan", None), ("checkpoint_chunk10", 10)):
            f = jax.jit(jax.value_and_grad(lambda Z: obj(Z, chunk)))
            t0 = time.perf_counter()
            f.lower(Z).compile()
            row[f"compile_grad_{label}_s"] = time.perf_counter() - t0
        for K in starts:
            f = jax.jit(jax.vmap(jax.value_and_grad(obj)))
            ZK = jnp.zeros((K, prob.steps, prob.nv))
            t0 = time.perf_counter()
            fc = f.lower(ZK).compile()
            comp = time.perf_counter() - t0
            t = timeit(lambda: jax.block_until_ready(fc(ZK)), min_time=0.5, max_reps=20)
            row["per_step_ms"][K] = {"total": t * 1e3, "per_start": t * 1e3 / K, "compile_s": comp}
            print(f"{name} K={K}: {t * 1e3:.2f} ms per step ({t * 1e3 / K:.3f} ms per start), compile {comp:.1f} s",
                  flush=True)
        o = cfg["optimizer"]
        t0 = time.perf_counter()
        r = to.optimize(prob, iterations=o["iterations"], rounds=o["rounds"], rho=o["rho"])
        jax.block_until_ready(r.U)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = to.optimize(prob, iterations=o["iterations"], rounds=o["rounds"], rho=o["rho"])
        jax.block_until_ready(r.U)
        second = time.perf_counter() - t0
        row["optimize"] = {"iterations": int(r.history.shape[0]), "first_call_s": first, "run_s": second,
                           "compile_s_est": first - second, "per_iteration_ms": 1e3 * second / r.history.shape[0],
                           "defect": float(r.defect), "effort": float(to.effort(r.U, prob.dt))}
        print(f"{name}: optimize {r.history.shape[0]} L-BFGS iterations: first call {first:.1f} s, "
              f"then {second:.1f} s ({1e3 * second / r.history.shape[0]:.1f} ms/iteration)", flush=True)
        out[name] = row
    return out


def bench_identification(samples):
    import jax
    import jax.numpy as jnp

    import jaxdyn
    from jaxdyn.apps import sysid as si
    from jaxdyn.apps.identify_cli import perturb

    m = jaxdyn.robots.puma560()
    f = si.fourier_excitation(m, jax.random.PRNGKey(0), 5, 10.0, 1.0)
    Yfn = si.regressors
    theta0 = np.asarray(jaxdyn.log_cholesky_parameters(perturb(m, jax.random.PRNGKey(2), 0.5)))
    rows = {}
    for N in samples:
        t = jnp.linspace(0, 20.0, N)
        Q, QD, QDD = si.sample_fourier(f, t)
        tau = np.asarray(jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a))(Q, QD, QDD))
        tau = tau + 0.5 * np.random.default_rng(0).normal(size=tau.shape)
        Yfn(m, Q, QD, QDD).block_until_ready()
        t_reg = timeit(lambda: Yfn(m, Q, QD, QDD).block_until_ready(), min_time=0.3, max_reps=10)
        Y = np.asarray(Yfn(m, Q, QD, QDD))
        t0 = time.perf_counter()
        base = si.base_parameters(Y.reshape(-1, 60))
        pib = si.identify_least_squares(Y, tau, base)
        t_ls = time.perf_counter() - t0
        si.identify_consistent(Y, tau, theta0, steps=2000).pi.block_until_ready()     # compile
        t0 = time.perf_counter()
        fit = si.identify_consistent(Y, tau, theta0, steps=2000)
        fit.pi.block_until_ready()
        t_c = time.perf_counter() - t0
        pi_b = base.reduce(si.inertial_parameters(m))
        rel = lambda x: float(np.linalg.norm(x - pi_b) / np.linalg.norm(pi_b))  # noqa: E731
        rows[N] = {"regressor_s": t_reg, "base_and_least_squares_s": t_ls, "consistent_2000_s": t_c,
                   "rel_error_ls": rel(pib), "rel_error_consistent": rel(base.reduce(fit.pi))}
        print(f"identification N={N}: regressor {t_reg * 1e3:.1f} ms, base+LS {t_ls * 1e3:.1f} ms, consistent "
              f"{t_c:.2f} s; base-parameter error LS {rel(pib):.2e}, consistent {rel(base.reduce(fit.pi)):.2e}",
              flush=True)
    return rows


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axs = plt.subplots(1, 2, figsize=(11, 4))
    for name, row in res["trajopt"].items():
        K = sorted(int(k) for k in row["per_step_ms"])
        axs[0].loglog(K, [row["per_step_ms"][str(k)]["per_start"] for k in K], "o-", label=f"{name} (per start)")
        axs[0].loglog(K, [row["per_step_ms"][str(k)]["total"] for k in K], "s--", label=f"{name} (whole batch)")
    axs[0].set_xlabel("multi-starts K")
    axs[0].set_ylabel("ms per optimizer step (value_and_grad)")
    axs[0].legend(fontsize=7)
    axs[0].grid(alpha=0.3, which="both")
    N = sorted(int(n) for n in res["identification"])
    for key, lab in (("regressor_s", "stacked regressor"), ("base_and_least_squares_s", "base params + LS"),
                     ("consistent_2000_s", "consistent (2000 L-BFGS)")):
        axs[1].loglog(N, [res["identification"][str(n)][key] for n in N], "o-", label=lab)
    axs[1].set_xlabel("samples N (PUMA)")
    axs[1].set_ylabel("s")
    axs[1].legend(fontsize=7)
    axs[1].grid(alpha=0.3, which="both")
    fig.suptitle(f"jaxdyn applications ({res['machine']})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=_ints, default=[1, 4, 16, 64, 256, 1024])
    ap.add_argument("--samples", type=_ints, default=[250, 1000, 4000])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "apps.json"))
    a = ap.parse_args()
    import jax
    jax.config.update("jax_enable_x64", True)
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}",
           "trajopt": bench_trajopt(a.starts), "identification": bench_identification(a.samples)}
    res["trajopt"] = {k: {**v, "per_step_ms": {str(kk): vv for kk, vv in v["per_step_ms"].items()}}
                      for k, v in res["trajopt"].items()}
    res["identification"] = {str(k): v for k, v in res["identification"].items()}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    plot(res, a.out[:-5] + ".png")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
