"""Every example-robot-data URDF that Pinocchio loads also loads in jaxdyn (fixed base, and
with a free-flyer root), and rnea / crba / aba agree with Pinocchio to 1e-10 relative at
random states.  All models are stacked (``jaxdyn.stack``) so each algorithm compiles once."""
import glob
import os
import warnings

import jax
import numpy as np
import pytest

import jaxdyn
from helpers import ROBOTS_DIR

pin = pytest.importorskip("pinocchio")
N_STATES = 2


def _corpus():
    if ROBOTS_DIR is None:
        pytest.skip("example-robot-data not installed")
    out = []
    for f in sorted(glob.glob(os.path.join(ROBOTS_DIR, "**", "*.urdf"), recursive=True)):
        for fb in (False, True):
            try:
                pm = pin.buildModelFromUrdf(f, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(f)
            except Exception:      # e.g. ur3.urdf: "No name given for the robot" (urdfdom)
                continue
            out.append((os.path.relpath(f, ROBOTS_DIR), fb, pm))
    return out


def _states(pm, rng):
    lo, hi = pm.lowerPositionLimit.copy(), pm.upperPositionLimit.copy()
    lo[~np.isfinite(lo)] = -1.0
    hi[~np.isfinite(hi)] = 1.0
    lo, hi = np.maximum(lo, -3.0), np.minimum(hi, 3.0)
    return [(pin.randomConfiguration(pm, lo, hi), rng.normal(size=pm.nv), rng.normal(size=pm.nv))
            for _ in range(N_STATES)]


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    rows = []
    for rel, fb, pm in _corpus():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # triangle / inertia / mimic warnings are expected
            m = jaxdyn.load_urdf(os.path.join(ROBOTS_DIR, rel), floating_base=fb)
        assert (m.nq, m.nv) == (pm.nq, pm.nv), rel
        data = pm.createData()
        refs = []
        for q, v, a in _states(pm, rng):
            tau = pin.rnea(pm, data, q, v, a).copy()
            M = pin.crba(pm, data, q).copy()
            M = np.triu(M) + np.triu(M, 1).T
            qdd = pin.aba(pm, data, q, v, tau + 1.0).copy()
            h = pin.rnea(pm, data, q, v, np.zeros(pm.nv)).copy()
            refs.append((q, v, a, tau, M, qdd, h))
        rows.append((rel, fb, m, refs))
    return rows


def test_every_file_pinocchio_loads_loads(corpus):
    # 67 files x (fixed, free) minus what urdfdom rejects; nq = 0 models (quadrotor_base,
    # iris_simple with a fixed base) included
    assert len(corpus) >= 130
    assert any(m.nq == 0 for _, _, m, _ in corpus)


def test_corpus_matches_pinocchio(corpus):
    models = [m for _, _, m, _ in corpus]
    big = jaxdyn.stack(models)
    P = lambda m, x, n: np.asarray(jaxdyn.pad_state(m, np.stack(x), n))    # one call pads a model's states
    Q = np.stack([P(m, [r[0] for r in refs], big.nq) for _, _, m, refs in corpus])
    V = np.stack([P(m, [r[1] for r in refs], big.nv) for _, _, m, refs in corpus])
    A = np.stack([P(m, [r[2] for r in refs], big.nv) for _, _, m, refs in corpus])
    TAU = np.stack([P(m, [r[3] + 1.0 for r in refs], big.nv) for _, _, m, refs in corpus])

    def per_robot(model, q, v, a, tau):
        return (jax.vmap(lambda q, v, a: jaxdyn.rnea(model, q, v, a))(q, v, a),
                jax.vmap(lambda q: jaxdyn.crba(model, q))(q),
                jax.vmap(lambda q, v, t: jaxdyn.aba(model, q, v, t))(q, v, tau))

    tau_j, M_j, qdd_j = (np.asarray(x) for x in jax.jit(jax.vmap(per_robot))(big, Q, V, A, TAU))
    bad = []
    for i, (rel, fb, m, refs) in enumerate(corpus):
        nv = m.nv
        for s, (_, _, _, tau, M, qdd, h) in enumerate(refs):
            for nm, got, ref in (("rnea", tau_j[i, s, :nv], tau), ("crba", M_j[i, s, :nv, :nv], M),
                                 ("aba", qdd_j[i, s, :nv], qdd)):
                got, ref = np.asarray(got), np.asarray(ref)
                fin = np.isfinite(ref)
                if nm == "aba":     # singular models (massless leaves): NaN exactly where Pinocchio is
                    if not np.array_equal(np.isfinite(got), fin):
                        bad.append(f"{rel} fb={fb} {nm}: non-finite pattern differs")
                        continue
                scale = max(1.0, np.abs(ref[fin]).max()) if fin.any() else 1.0
                err = np.abs(got[fin] - ref[fin]).max() / scale if fin.any() else 0.0
                if err > 1e-10 and nm == "aba" and fin.all():
                    # ill-conditioned M (icub: cond up to 1e11): forward errors of cond * eps are
                    # round-off; require instead that jaxdyn's qdd solves Pinocchio's M qdd + h =
                    # tau with a normwise backward error at round-off
                    r = M @ got + h - (tau + 1.0)
                    back = np.abs(r).max() / (np.abs(M).max() * np.abs(got).max() + np.abs(tau + 1.0 - h).max())
                    err = err if back > 1e-14 else 0.0
                if err > 1e-10:
                    bad.append(f"{rel} fb={fb} {nm}: {err:.2e}")
    assert not bad, "\n".join(bad)
