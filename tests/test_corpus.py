"""Every example-robot-data URDF that Pinocchio loads also loads in jaxdyn (fixed base, and
with a free-flyer root), and rnea / crba / aba agree with Pinocchio to 1e-10 relative at
random states.  The models are stacked (``jaxdyn.stack``, a few robots per stack) so that each
algorithm compiles once per stack."""
import glob
import os
import warnings

import jax
import jax.numpy as jnp
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
        rows.append((rel, fb, m, refs, (pm.effortLimit.copy(), pm.velocityLimit.copy(), pm.damping.copy(),
                                      pm.friction.copy())))
    return rows


def test_every_file_pinocchio_loads_loads(corpus):
    # 67 files x (fixed, free) minus what urdfdom rejects; nq = 0 models (quadrotor_base,
    # iris_simple with a fixed base) included
    assert len(corpus) >= 130
    assert any(m.nq == 0 for _, _, m, _, _ in corpus)


def test_effort_and_velocity_limits_match_pinocchio(corpus):
    # Pinocchio reads <limit effort velocity> (a free-flyer's are its largest float, a missing
    # or 0 limit is 0 there); jaxdyn's "no limit" is +inf.  Compared at float32 resolution (the
    # URDF's decimal text).
    n = 0
    for rel, fb, m, _, (eff, vel, _, _) in corpus:
        for got, ref in ((m.effort_limit, eff), (m.velocity_limit, vel)):
            want = np.where((ref > 0) & (ref < 1e300), ref, np.inf)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7, err_msg=rel)
            n += int(np.isfinite(want).sum())
    assert n > 500


def test_joint_damping_and_coulomb_friction_match_pinocchio(corpus):
    # <dynamics damping friction> as Pinocchio reads them (0 where absent)
    n = 0
    for rel, fb, m, _, (_, _, damping, friction) in corpus:
        np.testing.assert_allclose(np.asarray(m.damping), damping, rtol=1e-7, err_msg=rel)
        np.testing.assert_allclose(np.asarray(m.friction), friction, rtol=1e-7, err_msg=rel)
        n += int(np.count_nonzero(friction))
    assert n > 50


GROUP = 46
"""Robots per stack: each stack is the union of its members' trees (a per-lane cost of the
union's size), so the corpus is split into stacks of similar size."""


def _run_stack(rows):
    """rnea, crba and aba of every state of every member of one stack, in the members' layouts.
    The states move between the layouts in numpy (``Stack.member_dofs``), and q once per member
    (``Stack.q``): an eager JAX call per state and robot would compile a small program for
    each shape."""
    st = jaxdyn.stack([r[2] for r in rows])
    lanes = [j for j, r in enumerate(rows) for _ in r[3]]
    big = st.lanes(lanes)
    dofs = [big.member_dofs(j, "v") for j in range(len(rows))]

    def v(j, x):                                    # member j's (n, nv_j) in the union's layout
        out = np.zeros(x.shape[:-1] + (big.nv,))
        out[..., dofs[j]] = x
        return out
    per = [[np.stack([np.asarray(r[k]) for r in row[3]]) for k in range(4)] for row in rows]
    Q = np.concatenate([np.asarray(big.q(j, p[0])) for j, p in enumerate(per)])
    V, A, TAU = (np.concatenate([v(j, p[k] + (1.0 if k == 3 else 0.0)) for j, p in enumerate(per)]) for k in (1, 2, 3))
    f = jax.jit(jax.vmap(lambda m, q, v, a, t: (jaxdyn.rnea(m, q, v, a), jaxdyn.crba(m, q), jaxdyn.aba(m, q, v, t))))
    tau, M, qdd = (np.asarray(x) for x in f(big, jnp.asarray(Q), jnp.asarray(V), jnp.asarray(A), jnp.asarray(TAU)))
    out, k = [], 0
    for j, (_, _, _, refs, _) in enumerate(rows):
        d = dofs[j]
        out.append([(tau[k + s][d], M[k + s][np.ix_(d, d)], qdd[k + s][d]) for s in range(len(refs))])
        k += len(refs)
    return out


def test_corpus_matches_pinocchio(corpus):
    rows = sorted(corpus, key=lambda r: r[2].nb)
    got = {}
    for g in range(0, len(rows), GROUP):
        for row, res in zip(rows[g:g + GROUP], _run_stack(rows[g:g + GROUP])):
            got[id(row)] = res
    bad = []
    for row in corpus:
        rel, fb, m, refs, _ = row
        for s, (_, _, _, tau, M, qdd, h) in enumerate(refs):
            for nm, got_, ref in zip(("rnea", "crba", "aba"), got[id(row)][s], (tau, M, qdd)):
                got_, ref = np.asarray(got_), np.asarray(ref)
                fin = np.isfinite(ref)
                if nm == "aba":     # singular models (massless leaves): NaN exactly where Pinocchio is
                    if not np.array_equal(np.isfinite(got_), fin):
                        bad.append(f"{rel} fb={fb} {nm}: non-finite pattern differs")
                        continue
                scale = max(1.0, np.abs(ref[fin]).max()) if fin.any() else 1.0
                err = np.abs(got_[fin] - ref[fin]).max() / scale if fin.any() else 0.0
                if err > 1e-10 and nm == "aba" and fin.all():
                    # ill-conditioned M (icub: cond up to 1e11): forward errors of cond * eps are
                    # round-off; require instead that jaxdyn's qdd solves Pinocchio's M qdd + h =
                    # tau with a normwise backward error at round-off
                    r = M @ got_ + h - (tau + 1.0)
                    back = np.abs(r).max() / (np.abs(M).max() * np.abs(got_).max() + np.abs(tau + 1.0 - h).max())
                    err = err if back > 1e-14 else 0.0
                if err > 1e-10:
                    bad.append(f"{rel} fb={fb} {nm}: {err:.2e}")
    assert not bad, "\n".join(bad)
