"""float32: with jax_enable_x64 off (a user's default), every algorithm and every constrained
method runs in float32 and agrees with the float64 results of this process to float32
round-off (relative to the largest entry, amplified by the problem's conditioning)."""
import json
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np

import jaxdyn

CODE = textwrap.dedent("""
    import json, numpy as np, jax, jax.numpy as jnp
    import jaxdyn
    out = {}
    m = jaxdyn.robots.random_tree(8, 0.5, 28, floating_base=True)
    q = jnp.asarray(np.asarray(jaxdyn.neutral(m)) + 0.3 * np.random.default_rng(0).normal(size=m.nq), jnp.float32)
    v = jnp.linspace(-1.0, 1.0, m.nv)
    out["dtype"] = str(q.dtype)
    out["aba"] = jaxdyn.aba(m, q, v, v).tolist()
    out["rnea"] = jaxdyn.rnea(m, q, v, v).tolist()
    out["crba"] = jaxdyn.crba(m, q).tolist()
    out["vmap_aba"] = jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, jnp.stack([q, q]), jnp.stack([v, v]), jnp.stack([v, v])).tolist()
    out["aba_derivatives"] = jaxdyn.aba_derivatives(m, q, v, v)[0].tolist()
    cm, qc = jaxdyn.mechanisms.quadruped()
    ls = jaxdyn.legged_system(cm.model, qc, ["LF_foot", "RF_foot", "LH_foot", "RH_foot"])
    z = jnp.zeros(cm.model.nv)
    for meth, sys_ in (("schur", cm), ("kkt", cm), ("lilly_orin", ls), ("rccfd", ls)):
        out["legged_" + meth] = jaxdyn.constrained_forward_dynamics(sys_, jnp.asarray(qc), z, z + 1.0, method=meth).qdd.tolist()
    qs = np.zeros(cm.model.nq); qs[2], qs[6] = 0.6, 1.0               # straight legs: singular chains
    ls = jaxdyn.legged_system(cm.model, qs, ["LF_foot", "RF_foot", "LH_foot", "RH_foot"])
    for meth in ("lilly_orin", "rccfd"):
        out["straight_" + meth] = jaxdyn.constrained_forward_dynamics(ls, jnp.asarray(qs), z, z + 1.0, method=meth).qdd.tolist()
    gs0, qg0 = jaxdyn.mechanisms.arms_holding_box(2, arm_q=(0.0,) * 6, form="grasp")
    out["arms_zero_lilly_orin"] = jaxdyn.constrained_forward_dynamics(gs0, jnp.asarray(qg0), jnp.zeros(gs0.nv),
                                                                      jnp.ones(gs0.nv), method="lilly_orin").qdd.tolist()
    gs, qg = jaxdyn.mechanisms.arms_holding_box(2, form="grasp")
    for meth in ("rccfd", "lilly_orin"):
        out["grasp_" + meth] = jaxdyn.constrained_forward_dynamics(gs, jnp.asarray(qg), jnp.zeros(gs.nv),
                                                                  jnp.ones(gs.nv), method=meth).qdd.tolist()
    print(json.dumps(out))
""")


def test_every_method_runs_in_float32():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "JAX_ENABLE_X64": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    f32 = json.loads(r.stdout.strip().splitlines()[-1])
    assert f32["dtype"] == "float32"
    m = jaxdyn.robots.random_tree(8, 0.5, 28, floating_base=True)
    assert len(set(m.types)) == 7
    q = jnp.asarray(np.asarray(jaxdyn.neutral(m)) + 0.3 * np.random.default_rng(0).normal(size=m.nq), jnp.float32)
    q = q.astype(jnp.float64)
    v = jnp.linspace(-1.0, 1.0, m.nv)
    ref = {"aba": jaxdyn.aba(m, q, v, v), "rnea": jaxdyn.rnea(m, q, v, v), "crba": jaxdyn.crba(m, q),
           "aba_derivatives": jaxdyn.aba_derivatives(m, q, v, v)[0]}
    ref["vmap_aba"] = jnp.stack([ref["aba"], ref["aba"]])
    # each closed system's float64 reference is one solve (Schur's, on the closed model): the
    # methods agree in float64 to 1e-9 (tests/test_constraints.py, tests/test_multichain.py)
    cm, qc = jaxdyn.mechanisms.quadruped()
    z = jnp.zeros(cm.model.nv)
    legged = jaxdyn.constrained_forward_dynamics(cm, jnp.asarray(qc), z, z + 1.0).qdd
    for meth in ("schur", "kkt", "lilly_orin", "rccfd"):
        ref["legged_" + meth] = legged
    qs = np.zeros(cm.model.nq)
    qs[2], qs[6] = 0.6, 1.0
    closed_s = jaxdyn.legged_system(cm.model, qs, ["LF_foot", "RF_foot", "LH_foot", "RH_foot"]).closed
    ref["straight_lilly_orin"] = ref["straight_rccfd"] = jaxdyn.constrained_forward_dynamics(closed_s, qs, z, z + 1.0).qdd
    cm0, qg0 = jaxdyn.mechanisms.arms_holding_box(2, arm_q=(0.0,) * 6)
    ref["arms_zero_lilly_orin"] = jaxdyn.constrained_forward_dynamics(cm0, qg0, np.zeros(cm0.model.nv),
                                                                      np.ones(cm0.model.nv)).qdd          # schur, f64
    cg, qg = jaxdyn.mechanisms.arms_holding_box(2)
    ref["grasp_rccfd"] = ref["grasp_lilly_orin"] = jaxdyn.constrained_forward_dynamics(
        cg, qg, np.zeros(cg.model.nv), np.ones(cg.model.nv)).qdd
    for k, want in ref.items():
        got, want = np.asarray(f32[k]), np.asarray(want)
        scale = max(1.0, np.abs(want).max())
        assert np.all(np.isfinite(got)), k
        tol = 1e-3 if k == "aba_derivatives" else 1e-4           # M^-1 products: cond(M) eps
        assert np.abs(got - want).max() <= tol * scale, (k, np.abs(got - want).max() / scale)
