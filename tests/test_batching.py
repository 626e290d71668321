"""The batching module: ``jax.vmap`` of every batchable entry point equals the entry point per
state (batch-last chunks with and without a partial last chunk, batched parameters, batched
f_ext and gravity), the one-chunk path of other backends, sharded inputs, and stacks of
robots of different structure."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.model.model import PARAM_FIELDS
from jaxdyn import batching, vmap_rule
from helpers import close, urdf_path

ENTRY = {
    "aba": lambda m, q, v, x: jaxdyn.aba(m, q, v, x),
    "rnea": lambda m, q, v, x: jaxdyn.rnea(m, q, v, x),
    "crba": lambda m, q, v, x: jaxdyn.crba(m, q),
    "minv": lambda m, q, v, x: jaxdyn.minv(m, q),
    "fd_crba": lambda m, q, v, x: jaxdyn.forward_dynamics(m, q, v, x, method="crba"),
    "aba_derivatives": lambda m, q, v, x: jaxdyn.aba_derivatives(m, q, v, x),
    "rnea_derivatives": lambda m, q, v, x: jaxdyn.rnea_derivatives(m, q, v, x),
}


def states(m, B, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), B)
    Q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(keys)
    r = np.random.default_rng(seed)
    return Q, jnp.asarray(r.normal(size=(B, m.nv))), jnp.asarray(r.normal(size=(B, m.nv)))


_BATCHED = jax.jit(lambda m, Q, V, X: {k: jax.vmap(g, (None, 0, 0, 0))(m, Q, V, X) for k, g in ENTRY.items()})
_ONE = jax.jit(lambda m, q, v, x: {k: g(m, q, v, x) for k, g in ENTRY.items()})


def all_entries(m, Q, V, X):
    """Every entry point, vmapped and per state (a Python loop of the one-state programs; one
    program per model structure for every batch size)."""
    return _BATCHED(m, Q, V, X), [_ONE(m, Q[i], V[i], X[i]) for i in range(Q.shape[0])]


@pytest.mark.parametrize("B", [3, 130])
def test_vmap_equals_per_state_on_every_joint_type(B):
    """B = 130: two chunks of 128 states for the sweeps (the last one partial) and five of 32
    for the (nv, nv) kernels."""
    m = jaxdyn.robots.random_tree(9, 0.6, 243, floating_base=True)          # in 4 runs
    assert len(set(m.types)) == 7
    batched, per = all_entries(m, *states(m, B))
    for i in (0, 1, B - 1):
        for k in ENTRY:
            jax.tree_util.tree_map(lambda a, b: close(a[i], b, 1e-11, err=f"{k} state {i}"), batched[k], per[i][k])


def test_other_backends_run_one_chunk(monkeypatch):
    """The non-CPU branch of ``lax.platform_dependent`` (one chunk, no barriers), run on the CPU."""
    m = jaxdyn.robots.random_tree(6, 0.5, 2, floating_base=True)
    Q, V, X = states(m, 40)
    ref = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, Q, V, X)
    monkeypatch.setattr(vmap_rule.lax, "platform_dependent", lambda *a, cpu, default: default(*a))
    jax.clear_caches()
    got = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, Q, V, X)
    jax.clear_caches()
    close(got, ref, 1e-13)


def test_vmap_traces_the_algorithm_once_per_program_part(monkeypatch):
    """Compile time: ``jax.vmap`` over more states than a chunk traces ABA's passes three times,
    for the one-state primal (``custom_vmap`` traces it), the CPU chunk (its output shapes and
    the loop body share one trace) and the one chunk of other backends."""
    calls = []
    monkeypatch.setattr(batching, "aba_passes", lambda *a, **k: calls.append(1) or jaxdyn.dynamics.aba.aba_passes(*a, **k))
    m = jaxdyn.robots.random_tree(3, 0.5, 1)
    jax.clear_caches()
    jax.make_jaxpr(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, *states(m, 300))
    jax.clear_caches()
    assert len(calls) == 3


def test_vmap_over_parameters_f_ext_and_gravity():
    """A model with a mass per lane, f_ext and gravity per lane, some states shared: equals
    the per-lane calls."""
    m = jaxdyn.robots.random_tree(7, 0.5, 2, floating_base=True)
    B = 5
    Q, V, X = states(m, B, 3)
    masses = m.mass[None] * jnp.linspace(0.5, 2.0, B)[:, None]
    ms = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), m).replace(mass=masses)
    F = jnp.asarray(np.random.default_rng(1).normal(size=(B, m.nb, 6)))
    G = jnp.asarray(np.random.default_rng(2).normal(size=(B, 3)))
    got = jax.jit(jax.vmap(lambda mm, v, f, g: jaxdyn.aba(mm, Q[0], v, X[0], f, g, f_ext_frame="world")))(ms, V, F, G)
    got_rnea = jax.jit(jax.vmap(lambda mm, v, f, g: jaxdyn.rnea(mm, Q[0], v, X[0], f, g)))(ms, V, F, G)
    for i in range(B):
        mi = m.replace(mass=masses[i])
        close(got[i], jaxdyn.aba(mi, Q[0], V[i], X[0], F[i], G[i], f_ext_frame="world"), 1e-11)
        close(got_rnea[i], jaxdyn.rnea(mi, Q[0], V[i], X[0], F[i], G[i]), 1e-11)


def test_gradients_through_vmap_equal_per_state(robot_pair):
    """jax.grad of a loss over a vmapped aba (the implicit rule batched) equals the per-state
    gradients."""
    m, _ = robot_pair("panda")
    Q, V, X = states(m, 4, 5)
    loss = lambda m, Q, V, X: jnp.sum(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, Q, V, X) ** 2)
    g = jax.jit(jax.grad(loss, argnums=(1, 3)))(m, Q, V, X)
    one = jax.jit(jax.grad(lambda m, q, v, x: jnp.sum(jaxdyn.aba(m, q, v, x) ** 2), argnums=(1, 3)))
    for i in range(4):
        gi = one(m, Q[i], V[i], X[i])
        close(g[0][i], gi[0], 1e-10)
        close(g[1][i], gi[1], 1e-10)


def test_sharded_batch_stays_sharded():
    """Arrays sharded along the batch over 4 CPU devices: jax.jit(jax.vmap(aba)) returns a
    batch sharded the same way, equal to the unsharded result."""
    code = textwrap.dedent("""
        import jax, numpy as np
        jax.config.update("jax_num_cpu_devices", 4)
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        import jaxdyn
        m = jaxdyn.robots.random_tree(8, 0.5, 2, floating_base=True)
        B = 1024
        Q = jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(jax.random.split(jax.random.PRNGKey(0), B))
        V = jnp.asarray(np.random.default_rng(0).normal(size=(B, m.nv)))
        ref = np.asarray(jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, Q, V, V))
        sh = NamedSharding(Mesh(np.array(jax.devices()), ("b",)), P("b"))
        Qs, Vs = jax.device_put(Q, sh), jax.device_put(V, sh)
        out = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, Qs, Vs, Vs)
        assert len(jax.devices()) == 4
        assert out.sharding.is_equivalent_to(sh, 2), out.sharding
        assert len({s.device for s in out.addressable_shards}) == 4
        assert np.abs(np.asarray(out) - ref).max() < 1e-12
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


def test_two_processes_on_the_loopback_address(tmp_path):
    """The multi-host recipe of docs/performance.md: two processes join with
    jax.distributed.initialize, each holds half of a batch sharded over both, and each
    computes its half of jax.vmap(aba) (compared with its own unsharded result)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = textwrap.dedent(f"""
        import sys, jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        pid = int(sys.argv[1])
        jax.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id=pid)
        import jax.numpy as jnp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        import jaxdyn
        m = jaxdyn.robots.random_tree(8, 0.5, 2, floating_base=True)
        B = 256
        Q = np.asarray(jax.vmap(lambda k: jaxdyn.random_configuration(m, k))(jax.random.split(jax.random.PRNGKey(0), B)))
        V = np.random.default_rng(0).normal(size=(B, m.nv))
        sh = NamedSharding(Mesh(np.array(jax.devices()), ("b",)), P("b"))
        glob = lambda x: jax.make_array_from_callback(x.shape, sh, lambda idx: x[idx])
        out = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))(m, glob(Q), glob(V), glob(V))
        assert jax.process_count() == 2 and len(jax.devices()) == 2
        for shard in out.addressable_shards:
            rows = shard.index[0]
            ref = jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, Q[rows], V[rows], V[rows])
            assert np.abs(np.asarray(shard.data) - np.asarray(ref)).max() < 1e-12
        print("OK", pid)
    """)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for i, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"OK {i}" in out, err[-3000:]


def stack_members():
    panda = jaxdyn.load_urdf(urdf_path("panda"))
    return [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), panda,
            jaxdyn.robots.random_tree(5, 0.5, 14, floating_base=True),
            jaxdyn.robots.random_tree(6, 0.6, 6, floating_base=True)]          # all seven joint types, union in 4 runs


def test_stack_runs_every_member_as_itself():
    """vmap over a stack of five robots (three fixed arms, two floating trees) of aba, rnea,
    crba, forward kinematics and the derivatives equals each member's own result, in the
    member's layout; the members' q and v round-trip through the union's layout."""
    ms = stack_members()
    assert len(set(ms[3].types) | set(ms[4].types)) == 7
    st = jaxdyn.stack(ms)
    assert st.nb < sum(m.nb for m in ms)                   # the union shares bodies
    rng = np.random.default_rng(0)
    own = [(jaxdyn.random_configuration(m, jax.random.PRNGKey(j)), jnp.asarray(rng.normal(size=m.nv)),
            jnp.asarray(rng.normal(size=m.nv))) for j, m in enumerate(ms)]
    for j, (q, v, t) in enumerate(own):
        close(st.member_q(j, st.q(j, q)), q, 0)
        close(st.member_v(j, st.v(j, v)), v, 0)
    Q = jnp.stack([st.q(j, q) for j, (q, _, _) in enumerate(own)])
    V = jnp.stack([st.v(j, v) for j, (_, v, _) in enumerate(own)])
    T = jnp.stack([st.v(j, t) for j, (_, _, t) in enumerate(own)])
    f = jax.jit(jax.vmap(lambda m, q, v, t: (jaxdyn.aba(m, q, v, t), jaxdyn.rnea(m, q, v, t), jaxdyn.crba(m, q),
                                             jaxdyn.aba_derivatives(m, q, v, t)[0])))
    qdd, tau, M, dq = f(st, Q, V, T)
    for j, (m, (q, v, t)) in enumerate(zip(ms, own)):
        mv = lambda x: st.member_v(j, x)
        close(mv(qdd[j]), jaxdyn.aba(m, q, v, t), 1e-10, err=m.name)
        close(mv(tau[j]), jaxdyn.rnea(m, q, v, t), 1e-10, err=m.name)
        close(mv(mv(M[j]).T), jaxdyn.crba(m, q), 1e-10, err=m.name)
        close(mv(mv(dq[j]).T).T, jaxdyn.aba_derivatives(m, q, v, t)[0], 1e-9, err=m.name)
        # the union's dofs that the member does not have stay at rest
        rest = np.setdiff1d(np.arange(st.nv), np.asarray(st.v(j, jnp.arange(1.0, m.nv + 1)), int) - 1)
        assert np.all(np.asarray(qdd[j])[rest[np.asarray(st.v(j, jnp.ones(m.nv)))[rest] == 0]] == 0)


def test_stack_per_member_runs_the_members_trees():
    """A per-member stack (each member's lanes on the member's own tree) gives the union
    stack's numbers on every dof, for lanes in any order, with external forces; on a lane's
    inactive dofs aba gives tau / armature and crba the armature; a lane reordered by hand
    (its robot no longer the one lane_members names) gives NaN, not another robot's numbers;
    a stack vmapped over another count of lanes than lane_members is refused."""
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.random_tree(5, 0.5, 1, floating_base=True),
          jaxdyn.robots.stanford_arm()]
    lanes = [2, 0, 1, 0, 1]
    union, per = jaxdyn.stack(ms).lanes(lanes), jaxdyn.stack(ms, per_member=True).lanes(lanes)
    assert per.per_member and not union.per_member
    rng = np.random.default_rng(3)
    Q = jnp.stack([per.q(j, jaxdyn.random_configuration(ms[j], jax.random.PRNGKey(i))) for i, j in enumerate(lanes)])
    V, T = (jnp.asarray(rng.normal(size=(len(lanes), per.nv))) for _ in range(2))      # inactive dofs too
    F = np.zeros((len(lanes), per.nb, 6))
    for i, j in enumerate(lanes):
        F[i, list(per.body_maps[j])] = rng.normal(size=(ms[j].nb, 6))
    f = jax.jit(jax.vmap(lambda m, q, v, t, fe: (jaxdyn.aba(m, q, v, t, fe), jaxdyn.rnea(m, q, v, t, fe),
                                                 jaxdyn.crba(m, q), jaxdyn.aba_derivatives(m, q, v, t))))
    got, ref = f(per, Q, V, T, jnp.asarray(F)), f(union, Q, V, T, jnp.asarray(F))
    for g, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        close(g, r, 1e-9)
    qdd, _, M, _ = got
    for i, j in enumerate(lanes):
        rest = np.setdiff1d(np.arange(per.nv), per.member_dofs(j))
        close(qdd[i][rest], T[i][rest] / per.armature[i][rest], 1e-12)
        close(M[i][np.ix_(rest, rest)], np.diag(np.asarray(per.armature[i])[rest]), 0)
    mixed = jax.tree_util.tree_map(lambda a: a[::-1], per)          # lane_members no longer match
    qdd = np.asarray(jax.jit(jax.vmap(jaxdyn.aba))(mixed, Q, V, T))
    moved = [j != k for j, k in zip(lanes, lanes[::-1])]          # no member holds another's bodies
    assert np.all(np.isnan(qdd[moved])) and np.all(np.isfinite(qdd[~np.asarray(moved)]))
    with pytest.raises(jaxdyn.ArgumentError, match="lane_members"):
        jax.vmap(jaxdyn.crba)(jax.tree_util.tree_map(lambda a: a[:2], per), Q[:2])


def test_stack_per_member_with_a_member_without_joints(tmp_path):
    """A member whose joints are all fixed (nq = nv = 0) in a per-member stack: its lanes get
    the union stack's numbers (every dof inactive), the other member's lanes its own."""
    urdf = tmp_path / "quad.urdf"
    urdf.write_text('<robot name="quad"><link name="base"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" '
                    'ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link></robot>')
    ms = [jaxdyn.robots.puma560(), jaxdyn.load_urdf(str(urdf))]
    lanes = [1, 0, 1]
    union, per = jaxdyn.stack(ms).lanes(lanes), jaxdyn.stack(ms, per_member=True).lanes(lanes)
    q = jnp.linspace(-1.0, 1.0, 6)
    Q = jnp.stack([per.q(j, q if j == 0 else jnp.zeros(0)) for j in lanes])
    V, T = jnp.ones((3, per.nv)), jnp.full((3, per.nv), 2.0)
    f = jax.jit(jax.vmap(lambda m, q, v, t: {k: g(m, q, v, t) for k, g in ENTRY.items()}))
    got, ref = f(per, Q, V, T), f(union, Q, V, T)
    for k in ENTRY:
        jax.tree_util.tree_map(lambda g, r: close(g, r, 1e-10, err=k), got[k], ref[k])
    close(per.member_v(0, got["aba"][1]), jaxdyn.aba(ms[0], q, per.member_v(0, V[1]), per.member_v(0, T[1])), 1e-12)


def test_stack_lanes_and_rollout():
    """``lanes`` repeats members (a 4096-lane batch of a few robots is st.lanes(...)); a rollout
    vmapped over the lanes equals each member's own rollout."""
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm()]
    st = jaxdyn.stack(ms).lanes([0, 1, 1, 0])
    assert st.lane_members == (0, 1, 1, 0) and st.mass.shape[0] == 4
    q0 = [jnp.zeros(6), jnp.array([0, 1.5, 0, 0, 0, 0.0])]
    Q0 = jnp.stack([st.q(j, q0[j]) for j in st.lane_members])
    trs = jax.vmap(lambda m, q: jaxdyn.rollout(m, q, jnp.zeros(st.nv), None, 0.01, 50))(st, Q0)
    for lane, j in enumerate(st.lane_members):
        tr = jaxdyn.rollout(ms[j], q0[j], jnp.zeros(6), None, 0.01, 50)
        close(st.member_q(j, trs.q[lane]), tr.q, 1e-11)
    with pytest.raises(jaxdyn.ArgumentError, match="member 3"):
        st.lanes([3])
    # lane_model: each lane as its member Model (same topology and every parameter), with the
    # lane's own parameters after a per-lane change
    for lane, j in enumerate(st.lane_members):
        m = st.lane_model(lane)
        assert m.topology == ms[j].topology and m.name == ms[j].name
        for k in PARAM_FIELDS:
            np.testing.assert_array_equal(np.asarray(getattr(m, k)), np.asarray(getattr(ms[j], k)), err_msg=k)
    heavy = st.replace(mass=st.mass * jnp.arange(1.0, 5.0)[:, None])
    np.testing.assert_array_equal(np.asarray(heavy.lane_model(2).mass), 3 * np.asarray(ms[1].mass))
    with pytest.raises(jaxdyn.ArgumentError, match="lane 4"):
        st.lane_model(4)
