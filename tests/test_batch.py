"""aba_batch (the throughput ABA) against Pinocchio per state, identities, gradients, bad input.

One compile per model: chunk=16 with B = 37, so the batch is padded (37 -> 48) and three chunks
run.  The two-device (shard_map) path runs in a subprocess started with two host devices.
"""
import dataclasses
import importlib
import os
import subprocess
import sys
import textwrap
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import close, rng_states, singular_forest
from jaxdyn import aba_batch

B = 37
KW = dict(chunk=16)


def _batch(states):
    return [np.stack(x) for x in zip(*states)]


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_aba_batch_equals_pinocchio(robot_pair, name):
    """Per state, with f_ext on every body (Pinocchio's local frame) — fixed and floating bases."""
    pin = pytest.importorskip("pinocchio")
    m, pm = robot_pair(name)
    pd = pm.createData()
    q, v, _, tau = _batch(rng_states(m, pm, B, seed=5))
    fx = np.random.default_rng(1).normal(size=(B, m.nb, 6))
    qdd = aba_batch(m, q, v, tau, f_ext=fx, **KW)
    assert qdd.shape == (B, m.nv)
    for i in range(0, B, 4):
        fp = [pin.Force.Zero()] + [pin.Force(f[:3], f[3:]) for f in fx[i]]
        close(qdd[i], pin.aba(pm, pd, q[i], v[i], tau[i], fp))


@pytest.mark.parametrize("floating", [True, False])
def test_aba_batch_random_tree_all_joint_types(floating):
    """Spherical/planar/helical/prismatic joints (k = 3 slots in the scan), against Pinocchio."""
    pin = pytest.importorskip("pinocchio")
    from pinutil import align_rub_axes, to_pinocchio
    m = align_rub_axes(jaxdyn.robots.random_tree(12, 0.5, 4 if floating else 11, floating_base=floating))
    pm = to_pinocchio(m)
    pd = pm.createData()
    keys = jax.random.split(jax.random.PRNGKey(0), B)
    q = np.asarray(jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys))
    r = np.random.default_rng(2)
    v, tau = r.normal(size=(B, m.nv)), r.normal(size=(B, m.nv))
    g = np.array([0.3, -1.0, -9.0])
    qdd = aba_batch(m, q, v, tau, gravity=g, **KW)
    pm.gravity = pin.Motion(np.concatenate([g, np.zeros(3)]))
    for i in range(0, B, 6):
        close(qdd[i], pin.aba(pm, pd, q[i], v[i], tau[i]))


def test_aba_batch_identities_armature_f32_traced_model():
    """M qdd + h = tau with armature (floating base); f32 agrees with f64; a model traced
    under jit (general layout, no root split) gives the same answer."""
    m = jaxdyn.robots.random_tree(9, 0.4, 3, floating_base=True)
    m = m.replace(armature=jnp.linspace(0.0, 0.3, m.nv).at[:6].set(0.0))
    keys = jax.random.split(jax.random.PRNGKey(1), B)
    q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(3)
    v, tau = jnp.asarray(r.normal(size=(B, m.nv))), jnp.asarray(r.normal(size=(B, m.nv)))
    qdd = aba_batch(m, q, v, tau, **KW)
    lhs = jax.vmap(lambda q, v, a: jaxdyn.crba(m, q) @ a + jaxdyn.bias_forces(m, q, v))(q, v, qdd)
    close(lhs, tau)
    traced = jax.jit(lambda mm, q, v, t: aba_batch(mm, q, v, t, **KW))(m, q, v, tau)
    close(traced, qdd, 1e-11)
    m32 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32) if a.dtype == jnp.float64 else a, m)
    f32 = aba_batch(m32, q.astype(jnp.float32), v.astype(jnp.float32), tau.astype(jnp.float32), **KW)
    assert f32.dtype == jnp.float32
    close(f32, qdd, 1e-3)


def test_aba_batch_gradients_match_aba(robot_pair):
    """Reverse mode (gradient of a random projection w.r.t. q, qd, tau) and forward mode (a JVP)
    equal those of vmap(aba) (floating base: the root outside the scan is differentiated too)."""
    m, pm = robot_pair("anymal_c")
    args = tuple(jnp.asarray(a) for a in _batch(rng_states(m, pm, 2, seed=8)))
    args = (args[0], args[1], args[3])
    ours = lambda *a: aba_batch(m, *a, chunk=1)
    ref = lambda *a: jax.vmap(lambda *s: jaxdyn.aba(m, *s))(*a)
    W = jnp.asarray(np.random.default_rng(5).normal(size=(2, m.nv)))
    grad = lambda f: jax.grad(lambda *a: jnp.sum(W * f(*a)), argnums=(0, 1, 2))(*args)
    for g1, g2 in zip(grad(ours), grad(ref)):
        close(g1, g2, 1e-9)
    dirs = tuple(jnp.asarray(np.random.default_rng(4).normal(size=a.shape)) for a in args)
    close(jax.jvp(ours, args, dirs)[1], jax.jvp(ref, args, dirs)[1], 1e-9)


@pytest.mark.named_errors
def test_aba_batch_bad_input_and_singular():
    m = jaxdyn.robots.puma560()
    q = jnp.zeros((4, m.nq))
    with pytest.raises(jaxdyn.ShapeError, match="qd"):
        aba_batch(m, q, jnp.zeros((4, m.nv + 1)), jnp.zeros((4, m.nv)))
    with pytest.raises(jaxdyn.ShapeError, match="tau"):
        aba_batch(m, q, jnp.zeros((4, m.nv)), jnp.zeros((3, m.nv)))
    with pytest.raises(jaxdyn.ShapeError, match="q must"):
        aba_batch(m, jnp.zeros(m.nq), jnp.zeros(m.nv), jnp.zeros(m.nv))
    with pytest.raises(jaxdyn.ShapeError, match="floating-point"):
        aba_batch(m, q.astype(jnp.int32), jnp.zeros((4, m.nv), jnp.int32), jnp.zeros((4, m.nv), jnp.int32))
    with pytest.raises(jaxdyn.ShapeError, match="f_ext"):
        aba_batch(m, q, jnp.zeros((4, m.nv)), jnp.zeros((4, m.nv)), f_ext=jnp.zeros((4, m.nb)))
    # massless, inertia-free leaf on a revolute joint: D = 0, NaN as jaxdyn.aba
    ms = m.replace(mass=m.mass.at[5].set(0.0), inertia=m.inertia.at[5].set(0.0))
    assert np.all(np.isnan(aba_batch(ms, q, jnp.ones((4, m.nv)), jnp.ones((4, m.nv)), chunk=4)))


def test_aba_batch_two_host_devices():
    """With jax_num_cpu_devices=2 the batch is split over both devices (shard_map); the result
    equals vmap(aba) for a B that needs padding on each device, also for repeated and changed
    models (the model's replicated copy is cached per object).  derivatives_batch on two
    devices (analytic and autodiff) equals the per-state aba_derivatives.  Under the caller's
    own shard_map, vmap(aba), aba_batch (default devices), rollouts and a direct rk4 step run
    (their scans start from constants; no nested shard_map) and equal the unsharded results;
    vmap(aba) under a plain jit stays on one device.  derivatives_batch writes into a
    previous result (out) on two devices too."""
    code = textwrap.dedent("""
        import jax, numpy as np
        jax.config.update("jax_num_cpu_devices", 2)
        jax.config.update("jax_enable_x64", True)
        import gc, jaxdyn
        from jaxdyn.cli import GC_THRESHOLDS
        gc.set_threshold(*GC_THRESHOLDS)                 # as in the test run (conftest.py)
        assert jax.device_count() == 2
        m = jaxdyn.robots.random_tree(8, 0.4, 2, floating_base=True)
        B = 37
        q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(jax.random.split(jax.random.PRNGKey(0), B))
        r = np.random.default_rng(0)
        v, t = r.normal(size=(B, m.nv)), r.normal(size=(B, m.nv))
        out = jaxdyn.aba_batch(m, q, v, t, chunk=8)
        ref = jax.vmap(lambda *s: jaxdyn.aba(m, *s))(q, v, t)
        err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
        assert err < 1e-12, err
        # on both devices the model is placed once per model object (chunks.replicated): a
        # second call, and a changed model (a new object), are not served a stale copy
        m2 = m.replace(mass=m.mass * 2.0)
        ref2 = jax.vmap(lambda *s: jaxdyn.aba(m2, *s))(q, v, t)
        for mm, want in ((m, ref), (m, ref), (m2, ref2), (m, ref)):
            got = jaxdyn.aba_batch(mm, q, v, t, chunk=8, devices=2)
            assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) < 1e-12
        assert float(np.max(np.abs(ref2 - ref))) > 1e-3
        # a batch that fills whole chunks on both devices is split by the entry point itself
        # (chunks.split_rows): from numpy, from one device, and already split (kept as is)
        from jaxdyn.dynamics.chunks import split_rows
        parts = split_rows((q[:32], v[:32], t[:32]), 8, 2)
        assert all(len(a.sharding.device_set) == 2 for a in parts)
        assert split_rows(parts, 8, 2)[0] is parts[0]
        assert split_rows((q, v, t), 8, 2)[0] is q                        # 37 rows: padded in the program
        for args in ((np.asarray(q[:32]), v[:32], t[:32]), (q[:32], jax.numpy.asarray(v[:32]), t[:32]), parts):
            got = jaxdyn.aba_batch(m, *args, chunk=8, devices=2)
            assert float(np.max(np.abs(got - ref[:32])) / np.max(np.abs(ref))) < 1e-12
        # vmap(aba) stays on the devices of the caller's program: under the caller's own
        # shard_map (each device a share of the batch) and under a plain jit (one device)
        from jax.sharding import Mesh, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()), ("b",))
        va = jax.vmap(lambda *s: jaxdyn.aba(m, *s))
        Qb, Vb, Tb = (np.tile(a, (160, 1)) for a in (q[:32], v[:32], t[:32]))    # B * nb / 2 above the split
        sm = jax.jit(jax.shard_map(va, mesh=mesh, in_specs=(P("b"),) * 3, out_specs=P("b")))(Qb, Vb, Tb)
        smb = jax.jit(jax.shard_map(lambda *s: jaxdyn.aba_batch(m, *s), mesh=mesh, in_specs=(P("b"),) * 3,
                                    out_specs=P("b")))(Qb, Vb, Tb)     # default devices: the caller's share
        one = jax.jit(va)(Qb, Vb, Tb)
        assert len(one.sharding.device_set) == 1, one.sharding
        for out in (sm, smb, one):
            e = float(np.max(np.abs(out[:32] - ref[:32])) / np.max(np.abs(ref)))
            assert e < 1e-12, e
        # rollouts (rk4 stages, the time scan) under the caller's shard_map equal the vmapped
        # ones: sharded states, or one initial state (a constant carry) and sharded torques
        roll = jax.vmap(lambda a, b, u: jaxdyn.rollout(m, a, b, u, 0.01, 3, stepper="rk4").q)
        U = np.broadcast_to(t[:4, None], (4, 3, m.nv))
        got = jax.jit(jax.shard_map(roll, mesh=mesh, in_specs=(P("b"),) * 3, out_specs=P("b")))(q[:4], v[:4], U)
        assert float(np.max(np.abs(got - jax.jit(roll)(q[:4], v[:4], U)))) < 1e-12
        one_start = jax.vmap(lambda u: jaxdyn.rollout(m, q[0], v[0], u, 0.01, 3, stepper="rk4").q)
        got = jax.jit(jax.shard_map(one_start, mesh=mesh, in_specs=P("b"), out_specs=P("b")))(U)
        assert float(np.max(np.abs(got - jax.jit(one_start)(U)))) < 1e-12
        # one rk4 step called directly, sharded q and a shared qd: its stage scan starts from
        # zeros that do not vary over the mesh axis while the stages do
        from jaxdyn.integrators.rk4 import rk4
        dyn = lambda s, a, b: jaxdyn.aba(m, a, b, t[0])
        step = jax.vmap(lambda a: rk4(m, dyn, 0.0, a, v[0], 0.01)[1])
        got = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P("b"), out_specs=P("b")))(q[:4])
        assert float(np.max(np.abs(got - jax.jit(step)(q[:4])))) < 1e-12
        want = jax.vmap(lambda *s: jaxdyn.aba_derivatives(m, *s))(q[:5], v[:5], t[:5])
        for method, n in (("analytic", 5), ("autodiff", 5), ("analytic", 4)):    # 4: split by the entry point
            got = jaxdyn.derivatives_batch(m, q[:n], v[:n], t[:n], chunk=2, method=method, devices=2)
            for g, w in zip(got, want):
                e = float(np.max(np.abs(g - w[:n])) / np.max(np.abs(w)))
                assert e < 1e-10, (method, e)
        for n in (4, 5):                  # written into the previous result (out), split or padded
            prev = jaxdyn.derivatives_batch(m, q[:n], v[:n], t[:n], chunk=2, devices=2)
            got = jaxdyn.derivatives_batch(m, q[:n], v[:n], t[:n], chunk=2, devices=2, out=prev)
            for g, w in zip(got, want):
                assert float(np.max(np.abs(g - w[:n])) / np.max(np.abs(w))) < 1e-10
        print("ok", err)
    """)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]


def test_vmap_of_aba_runs_the_batch_kernels(robot_pair):
    """jax.vmap(jaxdyn.aba) over states of one model goes through aba_batch (custom_vmap rule)
    and equals the per-state passes (aba_unwrapped), with unbatched arguments broadcast, f_ext
    batched or shared, and gravity; world-frame f_ext and batched models keep the plain vmap.
    The batched program contains aba_batch's materializing conds, the plain one does not."""
    from jaxdyn.dynamics import aba_unwrapped
    m, pm = robot_pair("anymal_c")
    q, v, _, tau = (jnp.asarray(a) for a in _batch(rng_states(m, pm, 5, seed=3)))
    fx = jnp.asarray(np.random.default_rng(2).normal(size=(5, m.nb, 6)))
    g = jnp.array([0.3, 0.0, -9.0])
    ref = jax.jit(jax.vmap(lambda *a: aba_unwrapped(m, *a)))     # references jitted: one program
    close(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, q, v, tau), ref(q, v, tau), 1e-10)
    close(jax.vmap(jaxdyn.aba, (None, 0, None, 0))(m, q, v[0], tau),
          jax.jit(jax.vmap(lambda a, b: aba_unwrapped(m, a, v[0], b)))(q, tau), 1e-10)
    close(jax.vmap(lambda a, b, c, f: jaxdyn.aba(m, a, b, c, f, g))(q, v, tau, fx),
          jax.jit(jax.vmap(lambda a, b, c, f: aba_unwrapped(m, a, b, c, f, g)))(q, v, tau, fx), 1e-10)
    close(jax.vmap(lambda a, b, c: jaxdyn.aba(m, a, b, c, fx[0], f_ext_frame="world"))(q, v, tau),
          jax.jit(jax.vmap(lambda a, b, c: aba_unwrapped(m, a, b, c, fx[0], f_ext_frame="world")))(q, v, tau), 1e-10)
    text = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))).lower(m, q, v, tau).as_text()
    plain = jax.jit(jax.vmap(aba_unwrapped, (None, 0, 0, 0))).lower(m, q, v, tau).as_text()
    assert "stablehlo.case" in text and "stablehlo.case" not in plain      # aba_batch's _materialize
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm()]
    st = jaxdyn.stack(ms)
    Q = jnp.stack([jaxdyn.pad_state(mm, jaxdyn.neutral(mm) + 0.1, st.nq) for mm in ms])
    V = jnp.ones((2, st.nv)) * 0.2
    out = jax.vmap(jaxdyn.aba)(st, Q, V, V)
    for i, mm in enumerate(ms):
        close(out[i, :mm.nv], jax.jit(aba_unwrapped)(mm, Q[i, :mm.nq], V[i, :mm.nv], V[i, :mm.nv]), 1e-10)


def test_scan_layout_is_static_and_dropped_with_the_topology(robot_pair):
    """A floating-base model carries the batch-last kernels' plan as static metadata (so a
    traced model keeps the floating-root layout); replacing the topology drops it, and a plan
    is never kept for a model whose root is not a lone FREE joint.  A stack gets its own plan
    (body 0 out of the scan) when body 0 is every member's only root, whatever its joint."""
    from jaxdyn.model.model import floating_root_layout
    m, _ = robot_pair("anymal_c")
    assert m.scan_layout == floating_root_layout(m.parent, m.jtype, m.nb) == (True, 1, (jaxdyn.model.REVOLUTE,))
    seen = []
    jax.jit(lambda mm: seen.append(mm.scan_layout) or mm.mass)(m)
    assert seen == [m.scan_layout]
    assert m.replace(mass=m.mass * 2).scan_layout == m.scan_layout
    assert m.replace(jtype=m.jtype).scan_layout is None
    assert jaxdyn.stack([m, m]).scan_layout == m.scan_layout          # a stack's own plan
    assert jaxdyn.stack([m, jaxdyn.robots.puma560()]).scan_layout == ((1, 6), 1, (0, 1))
    assert jaxdyn.stack([m, m.replace(parent=m.parent.at[3].set(-1))]).scan_layout is None
    assert jaxdyn.robots.puma560().scan_layout is None
    assert jaxdyn.robots.random_tree(5, 0.5, 1, floating_base=True).scan_layout is not None


def test_static_tree_is_kept_under_jit_and_dropped_with_the_topology(robot_pair):
    """build_model records the topology (parent, vidx) as static metadata, so the ancestry
    matrices are numpy constants even for a Model passed to jit; replacing parent, vidx or the
    sizes, or stacking, drops it, and then the same matrices are computed from the arrays."""
    from jaxdyn.kinematics import ancestors
    from jaxdyn.dynamics.common import dof_owner
    from jaxdyn.model.model import tree_arrays
    m, _ = robot_pair("talos_reduced")
    p, vidx = tree_arrays(m)
    np.testing.assert_array_equal(p, np.asarray(m.parent))
    np.testing.assert_array_equal(vidx, np.asarray(m.vidx))
    seen = []
    jax.jit(lambda mm: seen.append(type(ancestors(mm))) or mm.mass)(m)
    assert seen == [np.ndarray]
    assert m.replace(mass=m.mass * 2).static_tree == m.static_tree
    for kw in (dict(parent=m.parent), dict(vidx=m.vidx)):
        assert m.replace(**kw).static_tree is None
    assert jaxdyn.stack([m, m]).static_tree is None
    traced = jax.jit(lambda mm: (ancestors(mm),) + tuple(dof_owner(mm)))(m.replace(parent=m.parent))
    for a, b in zip(traced, (ancestors(m),) + tuple(dof_owner(m))):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_vmap_of_aba_over_a_stack_runs_the_lanes_kernel():
    """jax.vmap(jaxdyn.aba) over a stack of models of different structure runs the batch-last
    kernel with a model per lane (aba_lanes) and equals each member's four-pass ABA
    (aba_unwrapped) on its own unpadded state, for stacks of floating bases (plan: FREE root
    out of the scan), of floating and fixed bases (plan: the members' root joint types, each
    lane's root steps picked among one run per type: free, helical, spherical and a fixed
    root joint), and with a forest (no plan), with f_ext per lane or shared; padded dofs get
    qdd = tau.  Inside jaxdyn.jit the sweeps read each body's parent among its candidates
    (Model.lane_parents) instead of gathering per lane, and each dof is read from the joint
    slots that hold it in some member (Model.lane_dofs) instead of a scatter per lane: the
    same numbers, and NaN for a lane whose parents or dof slots were changed behind the
    stack's back (not through Model.replace, which drops the lists)."""
    from jaxdyn.dynamics import aba_unwrapped
    R = jaxdyn.robots.random_tree
    fl = [R(9, 0.5, 3, floating_base=True), R(6, 0.3, 4, floating_base=True, joint_types=("revolute", "spherical"))]
    fixed = R(7, 0.5, 5, joint_types=("revolute", "prismatic", "helical"))
    roots = [R(6, 0.5, 7, joint_types=("spherical",)), R(5, 0.5, 1, joint_types=("fixed", "revolute"))]
    forest = R(8, 0.5, 6).replace(parent=R(8, 0.5, 6).parent.at[4].set(-1))
    rng = np.random.default_rng(0)
    mixed = tuple(sorted({6, int(fixed.jtype[0])}))
    assert len(mixed) == 2 and [int(m.jtype[0]) for m in roots] == [5, 0]
    for ms, plan in ((fl, True), (fl + [fixed], mixed), (fl[:1] + [fixed] + roots, tuple(sorted(mixed + (5, 0)))),
                     ([fixed, forest], None)):
        st = jaxdyn.stack(ms)
        assert (st.scan_layout or (None,))[0] == plan
        n = len(ms)
        Q = jnp.stack([jaxdyn.pad_state(m, jaxdyn.random_configuration(m, jax.random.PRNGKey(i)), st.nq)
                       for i, m in enumerate(ms)])
        V, T = (jnp.asarray(rng.normal(size=(n, st.nv))) for _ in range(2))
        F = jnp.asarray(rng.normal(size=(n, st.nb, 6)))
        f = jax.jit(jax.vmap(jaxdyn.aba))
        text = f.lower(st, Q, V, T, F).as_text()
        assert "stablehlo.case" in text                                  # the batch-last kernel's barriers
        out, shared = f(st, Q, V, T, F), jax.jit(jax.vmap(jaxdyn.aba, (0, 0, 0, 0, None)))(st, Q, V, T, F[0])
        fj = jaxdyn.jit(jax.vmap(jaxdyn.aba))
        cand = fj(st, Q, V, T, F)
        if plan is True:            # a parent array that the stack does not list, set without replace
            bad = st.parent.at[1, st.nb - 1].set(1 if int(st.parent[1, st.nb - 1]) != 1 else 2)
            assert bad[1, st.nb - 1] not in st.lane_parents[st.nb - 1]
            off = np.asarray(fj(dataclasses.replace(st, parent=bad), Q, V, T, F))
            assert np.isnan(off[1]).all() and np.isfinite(off[0]).all()
            # a vidx that puts a dof in a joint slot where no member has it (Model.lane_dofs)
            b, j = 2, int(st.vidx[1, 3, 0])
            assert (b, 0) not in st.lane_dofs[j] and int(st.vidx[1, b, 0]) != j
            swapped = st.vidx.at[1, 3, 0].set(st.vidx[1, b, 0]).at[1, b, 0].set(j)
            for fn in (f, fj):
                off = np.asarray(fn(dataclasses.replace(st, vidx=swapped), Q, V, T, F))
                assert np.isnan(off[1]).all() and np.isfinite(off[0]).all()
        Q, V, T, F, out, shared, cand = (np.asarray(x) for x in (Q, V, T, F, out, shared, cand))   # slice on the host
        for i, m in enumerate(ms):
            ref = jax.jit(aba_unwrapped)
            args = (Q[i, :m.nq], V[i, :m.nv], T[i, :m.nv])
            close(out[i, :m.nv], ref(m, *args, F[i, :m.nb]), 1e-9, err=f"{m.name} f_ext per lane")
            close(cand[i, :m.nv], ref(m, *args, F[i, :m.nb]), 1e-9, err=f"{m.name} candidate parents")
            close(shared[i, :m.nv], ref(m, *args, F[0, :m.nb]), 1e-9, err=f"{m.name} shared f_ext")
            np.testing.assert_array_equal(out[i, m.nv:], T[i, m.nv:])


def test_stack_chunks_of_one_model_run_one_models_kernel():
    """aba_lanes (what vmap(aba) over a stack runs) on a chunk whose lanes all hold the same
    model runs one model's kernel; a chunk with any lane that differs in a field the ABA reads
    (parent and joints, placement, mass, armature, gravity) runs the lanes kernel.  Lanes
    grouped by member, chunk = 3, B = 19: chunks [A A A] [B B B] [A A' A] ... and a last
    chunk [A] filled with copies of the first lane; with one more lane of B, a last chunk
    [A B fill] that is mixed (its models read past B).  The same lanes interleaved at random are
    run sorted by member_key (lane_order): each sorted chunk is flagged as one model exactly
    when its lanes hold one member (A' shares A's key unless its masses differ, so the full
    comparison, not the key, decides).  Each lane equals its own member's four-pass
    ABA (aba_unwrapped) with f_ext on every body of the stack (nonzero on a member's padding),
    for a stack of floating bases (plan: FREE root out of the scan) and of a floating and a
    fixed base (plan: the members' root types), in a plain jax.jit and in jaxdyn.jit."""
    from jaxdyn.dynamics import aba_unwrapped
    from jaxdyn.dynamics.batch_aba import aba_lanes, lane_order, member_key, one_model_chunks
    R = jaxdyn.robots.random_tree
    a = R(6, 0.4, 3, floating_base=True, joint_types=("revolute", "prismatic"))
    rng = np.random.default_rng(2)
    edits = [a.replace(mass=a.mass.at[3].mul(1.5)), a.replace(Xtree_r=a.Xtree_r.at[2, 1].add(0.1)),
             a.replace(armature=a.armature.at[4].add(0.2)), a.replace(gravity=jnp.array([0.5, 0.0, -9.0]))]
    fixed = R(7, 0.5, 5)
    for other, plan in ((R(9, 0.5, 4, floating_base=True), True), (fixed, tuple(sorted({6, int(fixed.jtype[0])})))):
        ms = [a, other] + edits
        st = jaxdyn.stack(ms)
        assert (st.scan_layout or (None,))[0] == plan
        grouped = np.array([0, 0, 0, 1, 1, 1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0])    # member per lane
        n = len(grouped)
        stb = jax.tree_util.tree_map(lambda x: x[grouped], st)
        np.testing.assert_array_equal(one_model_chunks(stb, 3),
                                      np.repeat([True, True, False, False, False, False, True], 3)[:n])
        order, moved = lane_order(stb, 3)
        assert not moved and (np.asarray(order) == np.arange(n)).all()     # grouped: run as given
        key = np.asarray(member_key(jax.tree_util.tree_map(lambda x: x[np.arange(len(ms))], st)))
        assert len(set(key[[0, 1, 2]])) == 3 and key[0] == key[3] == key[4] == key[5]   # A' with A's masses: A's key
        p = np.random.default_rng(6).permutation(n)                               # lane i of sti is lane p[i]
        interleaved = grouped[p]                                                  # 8 changes of key > 7 chunks
        sti = jax.tree_util.tree_map(lambda x: x[interleaved], st)
        order, moved = (np.asarray(x) for x in lane_order(sti, 3))
        assert moved and sorted(order) == list(range(n))
        runs = interleaved[order]                                            # members in the order run
        flags = np.asarray(one_model_chunks(sti, 3, order))
        want = [bool((runs[c:c + 3] == runs[c]).all()) for c in range(0, n, 3)]
        np.testing.assert_array_equal(flags, np.repeat(want, 3)[:n])
        assert sum(want) > sum(bool((interleaved[c:c + 3] == interleaved[c]).all()) for c in range(0, n, 3))
        assert not all(want[:-1])                                            # an A' among A's lanes
        Q = jnp.stack([jaxdyn.pad_state(ms[j], jaxdyn.random_configuration(ms[j], jax.random.PRNGKey(i)), st.nq)
                       for i, j in enumerate(grouped)])
        V, T = (jnp.asarray(rng.normal(size=(n, st.nv))) for _ in range(2))
        F = jnp.asarray(rng.normal(size=(n, st.nb, 6)))                          # [n; f], local
        refs = []
        for i, j in enumerate(grouped):
            m = ms[j]
            Fi = np.concatenate([F[i, :m.nb, 3:], F[i, :m.nb, :3]], -1)          # -> [f; n]
            refs.append(jax.jit(aba_unwrapped)(m, Q[i, :m.nq], V[i, :m.nv], T[i, :m.nv], Fi))
        for jit in (jax.jit, jaxdyn.jit):
            f = jit(partial(aba_lanes, chunk=3))
            tail = np.r_[np.arange(n), 3]             # grouped, then a last chunk [A B fill]: mixed, B % 3 != 0
            for tag, idx in (("grouped", np.arange(n)), ("interleaved", p), ("mixed last chunk", tail)):
                model = jax.tree_util.tree_map(lambda x: x[grouped[idx]], st)
                out = np.asarray(f(model, Q[idx], V[idx], T[idx], F[idx]))
                for i, k in enumerate(idx):
                    m = ms[grouped[k]]
                    close(out[i, :m.nv], refs[k], 1e-9, err=f"{tag} lane {i} (member {grouped[k]}), {jit.__module__}")
                    np.testing.assert_array_equal(out[i, m.nv:], T[k, m.nv:])


def test_vmap_of_aba_over_a_model_batched_in_its_masses():
    """jax.vmap(jaxdyn.aba) over one model with a mass per lane (in_axes on the mass field
    only; no Model.lane_parents or Model.lane_dofs) runs the lanes kernel, each lane reading
    its parent by a gather and scattering its dofs, and equals each lane's four-pass ABA
    (aba_unwrapped), floating and fixed base, in a plain jax.jit and in jaxdyn.jit."""
    from jaxdyn.dynamics import aba_unwrapped
    R = jaxdyn.robots.random_tree
    rng = np.random.default_rng(4)
    for m in (R(8, 0.5, 9, floating_base=True), R(7, 0.5, 10, joint_types=("revolute", "prismatic", "spherical"))):
        n = 5
        masses = jnp.asarray(np.asarray(m.mass) * rng.uniform(0.5, 2.0, size=(n, m.nb)))
        axes = dataclasses.replace(jax.tree_util.tree_map(lambda _: None, m), mass=0)
        Q = jnp.stack([jaxdyn.random_configuration(m, jax.random.PRNGKey(i)) for i in range(n)])
        V, T = (jnp.asarray(rng.normal(size=(n, m.nv))) for _ in range(2))
        for jit in (jax.jit, jaxdyn.jit):
            out = np.asarray(jit(jax.vmap(jaxdyn.aba, (axes, 0, 0, 0)))(dataclasses.replace(m, mass=masses), Q, V, T))
            for i in range(n):
                ref = jax.jit(aba_unwrapped)(m.replace(mass=masses[i]), Q[i], V[i], T[i])
                close(out[i], ref, 1e-9, err=f"lane {i}, {jit.__module__}")


def test_vmap_of_rnea_runs_the_batch_kernel(robot_pair):
    """jax.vmap(jaxdyn.rnea) over states of one model runs the batch-last RNEA (rnea_batch, a
    custom_vmap rule) and equals the recursive sweeps per state (rnea_recursive), with
    unbatched arguments broadcast, a gravity override and a batch that is not a whole number
    of chunks; f_ext keeps the plain vmap of the sweeps."""
    from jaxdyn.dynamics.rnea import rnea_recursive
    m, pm = robot_pair("anymal_c")
    q, v, a, _ = (jnp.asarray(x) for x in _batch(rng_states(m, pm, 5, seed=4)))
    g = jnp.array([0.3, 0.0, -9.0])
    fx = jnp.asarray(np.random.default_rng(3).normal(size=(m.nb, 6)))
    f = jax.jit(jax.vmap(lambda q, v, a: jaxdyn.rnea(m, q, v, a, gravity=g), (0, None, 0)))
    assert "stablehlo.case" in f.lower(q, v[0], a).as_text()            # the batch-last kernel's barriers
    close(f(q, v[0], a), jax.jit(jax.vmap(lambda qq, aa: rnea_recursive(m, qq, v[0], aa, None, g, "local")))(q, a), 1e-10)
    from jaxdyn.dynamics.batch_rnea import rnea_batch
    close(rnea_batch(m, q, v, a, chunk=2), jax.jit(jax.vmap(lambda *x: rnea_recursive(m, *x, None, None, "local")))(q, v, a), 1e-10)
    close(jax.vmap(lambda *x: jaxdyn.rnea(m, *x, fx))(q, v, a),
          jax.jit(jax.vmap(lambda *x: rnea_recursive(m, *x, fx, None, "local")))(q, v, a), 1e-10)


def test_crba_closed_form_batch_and_sweep_agree():
    """crba of one state (ancestry products, crba_terms), jax.vmap(crba) over states (batch-last
    chunks, crba_batch, also with a partial last chunk), vmap over a stack (the vmapped sweep)
    and its gradient (the custom_jvp rule through the sweep) all equal the composite-inertia
    sweep (crba_sweep), on a floating random tree with every joint type and a fixed-base
    forest."""
    from jaxdyn.dynamics.crba import crba_batch, crba_sweep
    R = jaxdyn.robots.random_tree
    tree, fixed = R(10, 0.5, 11, floating_base=True), R(8, 0.5, 12)
    forest = fixed.replace(parent=fixed.parent.at[5].set(-1))
    sweep = jax.jit(jax.vmap(crba_sweep, (None, 0)))
    Qf = jnp.stack([jaxdyn.random_configuration(forest, jax.random.PRNGKey(i)) for i in range(5)])
    close(jax.jit(jax.vmap(jaxdyn.crba, (None, 0)))(forest, Qf), sweep(forest, Qf), 1e-12)   # traced topology
    Q = jnp.stack([jaxdyn.random_configuration(tree, jax.random.PRNGKey(i)) for i in range(5)])
    ref = sweep(tree, Q)
    close(jax.jit(jax.vmap(jaxdyn.crba, (None, 0)))(tree, Q), ref, 1e-12)                     # static topology
    close(jax.jit(partial(crba_batch, chunk=2))(tree, Q), ref, 1e-12)
    close(jaxdyn.crba(tree, Q[0]), ref[0], 1e-12)
    loss = lambda f: jax.jit(jax.grad(lambda q: jnp.sum(f(tree, q) ** 2)))(Q[1])
    close(loss(jaxdyn.crba), loss(crba_sweep), 1e-10)
    st = jaxdyn.stack([tree, fixed])
    Qs = jnp.stack([jaxdyn.pad_state(m, jaxdyn.neutral(m) + 0.1, st.nq) for m in (tree, fixed)])
    out = jax.jit(jax.vmap(jaxdyn.crba))(st, Qs)
    for i, m in enumerate((tree, fixed)):
        close(out[i, :m.nv, :m.nv], jax.jit(crba_sweep)(m, Qs[i, :m.nq]), 1e-12)


def test_minv_vmap_rule_agrees():
    """jax.vmap(minv) over states of one model (batch-last chunks: crba_terms and nested Schur
    complements, also with a partial last chunk) equals numpy's inverse of crba per state, on a
    floating random tree with every joint type and on a forest whose first tree has a massless
    leaf (NaN on that tree's rows and columns, as the per-state minv); its gradient is the
    per-state method's; over a stack it is the plain vmap."""
    from jaxdyn.dynamics.minv import minv_batch
    R = jaxdyn.robots.random_tree
    tree, fixed = R(10, 0.5, 13, floating_base=True), R(6, 0.5, 14)
    Q = jnp.stack([jaxdyn.random_configuration(tree, jax.random.PRNGKey(i)) for i in range(5)])
    want = np.linalg.inv(np.asarray(jax.vmap(jaxdyn.crba, (None, 0))(tree, Q)))
    close(jax.vmap(jaxdyn.minv, (None, 0))(tree, Q), want, 1e-10)
    close(jax.jit(partial(minv_batch, chunk=2))(tree, Q), want, 1e-10)
    forest, A, B = singular_forest()
    r = np.random.default_rng(0)
    Qf = jnp.stack([jaxdyn.random_configuration(forest, jax.random.PRNGKey(i)) for i in range(3)])
    got = np.asarray(jax.vmap(jaxdyn.minv, (None, 0))(forest, Qf))
    one = np.stack([np.asarray(jaxdyn.minv(forest, q)) for q in Qf])
    assert np.isnan(got[:, A]).all() and np.isnan(got[:, :, A]).all()
    assert np.array_equal(np.isnan(got), np.isnan(one))
    MB = np.asarray(jax.vmap(jaxdyn.crba, (None, 0))(forest, Qf))[:, B][:, :, B]
    close(got[:, B][:, :, B], np.linalg.inv(MB), 1e-10)
    from jaxdyn.dynamics.minv import _minv_aba
    w = jnp.asarray(r.normal(size=(fixed.nv, fixed.nv)))
    Qx = jnp.stack([jaxdyn.random_configuration(fixed, jax.random.PRNGKey(i)) for i in range(2)])
    grad = lambda f: jax.grad(lambda Q: jnp.sum(jax.vmap(f, (None, 0))(fixed, Q) * w[None]))(Qx)
    close(grad(jaxdyn.minv), grad(_minv_aba), 1e-9)
    st = jaxdyn.stack([tree, fixed])
    Qs = jnp.stack([jaxdyn.pad_state(m, jaxdyn.neutral(m) + 0.1, st.nq) for m in (tree, fixed)])
    out = jax.jit(jax.vmap(jaxdyn.minv))(st, Qs)
    for i, m in enumerate((tree, fixed)):
        close(out[i, :m.nv, :m.nv], np.linalg.inv(np.asarray(jaxdyn.crba(m, Qs[i, :m.nq]))), 1e-10)


def test_entry_points_inside_a_callers_jit_over_constants():
    """Top-level calls compile with jaxdyn.CPU_OPTIONS; inside a caller's jit whose inputs are
    closed-over concrete arrays (no argument is a tracer) the entry points must fall back to
    the plain jit (compiler options are refused on a nested jit) and give the same numbers as
    the per-state aba and rnea_derivatives called at top level."""
    m = jaxdyn.robots.puma560()
    q = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (3, m.nq)))
    v, t = jnp.ones((3, m.nv)) * 0.3, jnp.ones((3, m.nv))
    ref = np.stack([jaxdyn.aba(m, *s) for s in zip(q, v, t)])
    close(jax.jit(lambda x: aba_batch(m, q, v, t, chunk=2) + x)(0.0), ref, 1e-12)
    close(jax.jit(lambda x: jaxdyn.aba(m, q[0], v[0], t[0]) + x)(0.0), ref[0], 1e-12)
    got = jax.jit(lambda x: jaxdyn.derivatives_batch(m, q, v, t, fn="rnea")[0] + x)(0.0)
    close(got, np.stack([jaxdyn.rnea_derivatives(m, *s)[0] for s in zip(q, v, t)]), 1e-10)
    assert jaxdyn.aba.__doc__.startswith("Forward dynamics")                    # wraps the function


def test_kernels_are_traced_for_the_options_they_compile_with(monkeypatch):
    """A batch-last kernel traced for jaxdyn.CPU_OPTIONS (an eager vmap, jaxdyn.jit) and one
    traced inside a plain jax.jit (XLA's default emitters) differ: the second reads at each
    scan index inside a barrier (a cond; the sweeps' read hook, batch.sweep_reader).  Which one is chosen where the
    kernel is traced, also in the custom_vmap rules that JAX runs when it batches a program
    traced before, and a trace cached in one context is not reused in the other; both
    formulations give the per-state numbers."""
    from jax.extend.core import jaxprs_in_params
    from jaxdyn.compiled import for_cpu_options, tracing_for
    from jaxdyn.dynamics import batch
    m = jaxdyn.robots.puma560()
    r = np.random.default_rng(3)
    Q, V, T = (jnp.asarray(r.uniform(-1, 1, (9, m.nv))) for _ in range(3))
    seen = []

    reader = batch.sweep_reader

    def spy(one):
        seen.append(for_cpu_options())
        return reader(one)
    monkeypatch.setattr(batch, "sweep_reader", spy)
    va = jax.vmap(jaxdyn.aba, (None, 0, 0, 0))
    runs = [("eager", va, 2, True), ("jax.jit", jax.jit(va), 3, False), ("jaxdyn.jit", jaxdyn.jit(va), 4, True),
            ("eager", va, 5, True), ("jax.jit", jax.jit(va), 6, False)]
    ref = np.stack([jaxdyn.aba(m, *s) for s in zip(Q, V, T)])
    for label, f, n, want in runs:                     # a new batch size: a new trace
        seen.clear()
        close(f(m, Q[:n], V[:n], T[:n]), ref[:n], 1e-12, label)
        assert seen and set(seen) == {want}, (label, seen)

    def conds(f, cpu_options):                      # a new function: make_jaxpr caches by function
        with tracing_for(cpu_options):
            jaxpr = jax.make_jaxpr(lambda *a: f(*a))(m, Q, V, T).jaxpr

        def count(j):
            return sum((e.primitive.name == "cond") + sum(count(s) for s in jaxprs_in_params(e.params))
                       for e in j.eqns)
        return count(jaxpr)
    vd = jax.vmap(jaxdyn.aba_derivatives, (None, 0, 0, 0))
    vr = jax.vmap(jaxdyn.rnea, (None, 0, 0, 0))
    for f in (va, vd, vr):                          # vd: spd_inverse's row barrier, vr: rnea's sweeps
        plain, options = conds(f, False), conds(f, True)
        assert plain > options > 0 and conds(f, False) == plain, (plain, options)
    for f, tol in ((vd, 1e-10), (vr, 1e-11)):
        a, b = jaxdyn.jit(f)(m, Q, V, T), jax.jit(f)(m, Q, V, T)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            close(x, y, tol)
    close(jax.jit(vd)(m, Q, V, T)[0][4], jaxdyn.aba_derivatives(m, Q[4], V[4], T[4])[0], 1e-10)


def test_cpu_options_reach_eager_vmap_only():
    """jaxdyn's entry points compile with CPU_OPTIONS at top level and under eager vmap only
    (the README's ``jax.vmap(jaxdyn.aba)(...)``); under a caller's jit, grad or jvp, also
    around or inside that vmap, they are the plain jit (JAX refuses compiler options on a
    nested jit).  Each combination runs and equals the per-state aba."""
    from jaxdyn.compiled import _vmap_only
    seen = []

    def probe(x):
        seen.append(_vmap_only())
        return x
    x = jnp.ones((2, 3))
    probe(x)
    jax.vmap(probe)(x)
    jax.vmap(jax.vmap(probe))(x)
    jax.jit(jax.vmap(probe))(x)
    jax.grad(lambda x: jnp.sum(jax.vmap(probe)(x)))(x)
    jax.vmap(jax.grad(lambda x: jnp.sum(probe(x))))(x)
    jax.jvp(jax.vmap(probe), (x,), (x,))
    assert seen == [False, True, True, False, False, False, False], seen
    m = jaxdyn.robots.puma560()
    q = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (3, m.nq)))
    v, t = jnp.ones((3, m.nv)) * 0.3, jnp.ones((3, m.nv))
    ref = np.stack([jaxdyn.aba(m, *s) for s in zip(q, v, t)])
    va = jax.vmap(jaxdyn.aba, in_axes=(None, 0, 0, 0))
    close(va(m, q, v, t), ref, 1e-12)
    close(jax.jit(va)(m, q, v, t), ref, 1e-12)
    g = jax.grad(lambda t: jnp.sum(va(m, q, v, t) ** 2))(t)
    close(g, jax.jit(jax.grad(lambda t: jnp.sum(va(m, q, v, t) ** 2)))(t), 1e-10)


def test_cpu_options_keep_fusions_out_of_ynnpack():
    """jaxdyn.CPU_OPTIONS turns off XLA:CPU's YNNPACK fusions (each a library call, which
    made the batch-last sweeps slower), and DOT_OPTIONS hands it dots only: no reduction or
    elementwise fusion goes to YNNPACK under either.  Checked on the compiled text of a
    program with a small reduction and a dot, so a jaxlib that reads the option differently
    fails here instead of silently changing the kernels."""
    from jaxdyn.compiled import DOT_OPTIONS
    x, A, y = jnp.ones((128, 6, 7)), jnp.ones((30, 30)), jnp.ones((30, 96))
    f = lambda x, A, y: (x.sum(-1), A @ y, jnp.tanh(y) * 2 + y)

    def ynn_ops(options):
        text = jax.jit(f, compiler_options=options).lower(x, A, y).compile().as_text()
        return [ln.split(" = ")[1].split("(")[0] for ln in text.splitlines()
                if '"__ynn_fusion"' in ln and " fusion(" in ln]
    assert ynn_ops(jaxdyn.CPU_OPTIONS) == []
    assert all("30,96" in s for s in ynn_ops(DOT_OPTIONS)), ynn_ops(DOT_OPTIONS)


def test_cpu_options_barrier_copies_nothing():
    """common.materialize (a lax.cond whose branch returns its operand) is a fusion barrier
    that, under jaxdyn.CPU_OPTIONS (copy insertion with region analysis), aliases its operand
    instead of copying it; without the option XLA copies it.  Checked on the compiled text,
    so a jaxlib that drops or renames the option fails here; the values are the same."""
    from jaxdyn.dynamics.common import materialize
    x = jnp.linspace(0.0, 1.0, 4096).reshape(64, 64)

    def f(x, i):
        y = materialize(jnp.sin(x) * 2.0, i)
        return y * y + y

    def copies(options):
        text = jax.jit(f, compiler_options=options).lower(x, 1).compile().as_text()
        return [ln for ln in text.splitlines() if " copy(" in ln]
    assert copies({k: v for k, v in jaxdyn.CPU_OPTIONS.items()
                   if k != "xla_cpu_copy_insertion_use_region_analysis"}) != []
    assert copies(jaxdyn.CPU_OPTIONS) == []
    got = jax.jit(f, compiler_options=jaxdyn.CPU_OPTIONS)(x, 1)
    want = 4.0 * np.sin(np.asarray(x)) ** 2 + 2.0 * np.sin(np.asarray(x))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=1e-14)


def test_thunk_barrier_computes_in_its_branch():
    """common.materialize given a thunk: in a program traced for XLA's default emitters (a
    caller's plain jit) the thunk runs inside the cond's branch, so the barrier copies nothing
    even without region analysis, where the value form is copied; traced for CPU_OPTIONS the
    thunk runs before the cond (there a product in the branch was slower).  Checked on the
    jaxpr (where the sine is) and the compiled text (copies); the values are the same."""
    from jaxdyn.compiled import tracing_for
    from jaxdyn.dynamics.common import materialize
    x = jnp.linspace(0.0, 1.0, 4096).reshape(64, 64)
    no_region = {k: v for k, v in jaxdyn.CPU_OPTIONS.items() if k != "xla_cpu_copy_insertion_use_region_analysis"}

    def f(thunk, x, i):
        y = materialize((lambda: jnp.sin(x) * 2.0) if thunk else jnp.sin(x) * 2.0, i)
        return y * y + y

    def copies(thunk):
        text = jax.jit(partial(f, thunk), compiler_options=no_region).lower(x, 1).compile().as_text()
        return [ln for ln in text.splitlines() if " copy(" in ln]

    def sine_in_branch(cpu_options):
        with tracing_for(cpu_options):
            jaxpr = jax.make_jaxpr(partial(f, True))(x, 1)
        cond = next(e for e in jaxpr.eqns if e.primitive.name == "cond")
        outside = any(e.primitive.name == "sin" for e in jaxpr.eqns)
        inside = any(e.primitive.name == "sin" for b in cond.params["branches"] for e in b.jaxpr.eqns)
        assert inside != outside
        return inside
    assert copies(False) != [] and copies(True) == []
    assert sine_in_branch(False) and not sine_in_branch(True)
    want = 4.0 * np.sin(np.asarray(x)) ** 2 + 2.0 * np.sin(np.asarray(x))
    for thunk in (False, True):
        got = jax.jit(partial(f, thunk), compiler_options=no_region)(x, 1)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=1e-14)


def test_take_static_equals_indexing():
    """common.take_static (slices of the index's contiguous runs, a gather past STATIC_RUNS
    runs) equals numpy indexing for in-order, permuted, repeated, 2-D and empty indices."""
    from jaxdyn.dynamics.common import STATIC_RUNS, take_static
    x = np.random.default_rng(0).normal(size=(40, 3))
    cases = [np.arange(40), np.arange(5, 12), np.array([3, 4, 5, 0, 1, 39]), np.array([7, 7, 2]),
             np.arange(6, 30).reshape(8, 3), np.arange(0, 40, 2)[:STATIC_RUNS + 3], np.zeros((0,), int),
             np.zeros((2, 0), int)]
    for idx in cases:
        got = take_static(jnp.asarray(x), idx)
        assert got.shape == x[idx].shape, (idx, got.shape)
        np.testing.assert_array_equal(np.asarray(got), x[idx])


def test_accelerator_default_chunks(monkeypatch):
    """On a backend other than the CPU (a GPU) the batch kernels' default chunk holds the whole
    batch up to ``ACCELERATOR_CHUNK`` (one chunk: a GPU runs a chunk's states in parallel).
    Here the backend test is patched: the one-chunk programs run on the CPU and must give the
    CPU chunks' answers (aba_batch, vmap of aba / rnea / crba, derivatives_batch, a stack)."""
    from jaxdyn.dynamics import chunks
    m = jaxdyn.robots.random_tree(6, 0.5, 2, floating_base=True)
    n = 130                                              # > 128: two chunks on the CPU, one here
    keys = jax.random.split(jax.random.PRNGKey(3), n)
    Q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(3)
    V, T = (jnp.asarray(r.normal(size=(n, m.nv))) for _ in range(2))
    m2 = jaxdyn.robots.random_tree(5, 0.5, 4, floating_base=True)
    st = jaxdyn.stack([m, m2])
    member = np.arange(n) % 2                            # interleaved: every chunk mixed on the CPU
    Q2 = jax.vmap(lambda k: jaxdyn.random_configuration(m2, k))(keys)
    Qs = jnp.where(member[:, None] == 0, jaxdyn.pad_state(m, Q, st.nq), jaxdyn.pad_state(m2, Q2, st.nq))
    Vs, Ts = (jnp.where((member[:, None] == 0) | (np.arange(st.nv) < m2.nv), jaxdyn.pad_state(m, X, st.nv), 0.0)
              for X in (V, T))
    lanes = jax.tree_util.tree_map(lambda a: a[member], st)

    def everything():
        one = lambda f, *a: jax.jit(jax.vmap(f, (None,) + (0,) * len(a)))(m, *a)
        return (jaxdyn.aba_batch(m, Q, V, T), one(jaxdyn.aba, Q, V, T), one(jaxdyn.rnea, Q, V, T),
                one(jaxdyn.crba, Q[:40]),
                jaxdyn.derivatives_batch(m, Q[:40], V[:40], T[:40], devices=1),
                jax.jit(jax.vmap(jaxdyn.aba))(lanes, Qs, Vs, Ts))

    seen = []                                            # the chunk each kernel's loop is given
    for name in ("batch_aba", "batch_rnea", "crba", "derivatives"):
        mod = importlib.import_module(f"jaxdyn.dynamics.{name}")
        monkeypatch.setattr(mod, "map_chunks", lambda fn, xs, chunk, *a, _f=mod.map_chunks, **k:
                            seen.append(chunk) or _f(fn, xs, chunk, *a, **k))
    assert chunks.default_chunk(None, 128) == 128 and chunks.default_chunk(7, 128) == 7
    cpu = everything()
    assert len(seen) == 6 and max(seen) <= 128, seen
    monkeypatch.setattr(chunks, "on_cpu", lambda: False)
    assert chunks.default_chunk(None, 128) == chunks.ACCELERATOR_CHUNK["sweeps"] > n
    assert chunks.default_chunk(None, 32, "matrices") == chunks.ACCELERATOR_CHUNK["matrices"] > 40
    jax.clear_caches()
    seen.clear()
    acc = everything()
    assert len(seen) == 6 and min(seen) >= chunks.ACCELERATOR_CHUNK["matrices"], seen
    for a, b in zip(jax.tree_util.tree_leaves(acc), jax.tree_util.tree_leaves(cpu)):
        close(a, b, rtol=1e-12)
