"""Bad input raises a named exception that names the offending item."""
import os
import re

import jax
import numpy as np
import pytest

import jaxdyn
from jaxdyn.errors import DHError, JaxdynWarning, ModelError, ShapeError, URDFError

pytestmark = pytest.mark.named_errors


def base_args(nb=3):
    return dict(parent=[-1, 0, 1][:nb], jtype=["revolute"] * nb, Xtree_E=np.tile(np.eye(3), (nb, 1, 1)),
                Xtree_r=np.zeros((nb, 3)), axis=np.tile([0, 0, 1.0], (nb, 1)), mass=np.ones(nb),
                com=np.zeros((nb, 3)), inertia=np.tile(np.eye(3) * 0.1, (nb, 1, 1)),
                body_names=["a", "b", "c"][:nb])


def test_valid_model_builds():
    assert jaxdyn.build_model(**base_args()).nb == 3


@pytest.mark.parametrize("field,value,match", [
    ("parent", [-1, 0, 2], r"body 2 \('c'\) has parent 2"),
    ("jtype", ["revolute", "screwy", "revolute"], r"body 1 \('b'\).*unknown joint type 'screwy'"),
    ("axis", np.array([[0, 0, 1.0], [0, 0, 2.0], [0, 0, 1.0]]), r"body 1 \('b'\).*axis.*unit"),
    ("axis", np.array([[0, 0, 1.0], [0, 0, 1.0], [0, 0, 0.0]]), r"body 2 \('c'\).*axis.*unit"),
    ("mass", np.array([1.0, -1.0, 1.0]), r"body 1 \('b'\): negative mass"),
    ("inertia", np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0]), np.eye(3)]), r"body 1 \('b'\).*positive"),
    ("inertia", np.stack([np.eye(3), np.eye(3), np.diag([0.1, 0.1, 1.0])]), r"body 2 \('c'\).*triangle"),
])
def test_model_validation(field, value, match):
    args = base_args()
    args[field] = value
    with pytest.raises(ModelError, match=match):
        jaxdyn.build_model(**args)


def test_dh_wrong_columns():
    with pytest.raises(DHError, match="4 columns"):
        jaxdyn.from_dh(np.zeros((3, 5)))
    with pytest.raises(DHError, match=r"row 2.*missing columns \['alpha'\]"):
        jaxdyn.from_dh([dict(a=0, b=0, alpha=0, theta=0), dict(a=0, b=0, theta=0)])
    with pytest.raises(DHError, match="'R' or 'P'"):
        jaxdyn.from_dh(np.zeros((2, 4)), joints="RX")


def write(tmp_path, text, name="r.urdf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


GOOD = """<robot name="r">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def test_urdf_axis_not_of_unit_length_is_normalized_as_pinocchio(tmp_path):
    """An axis like "1 1 0" means its direction: normalized with a warning naming the joint,
    and the model equals Pinocchio's (which normalizes it too)."""
    text = GOOD.replace('xyz="0 0 1"', 'xyz="1 1 0"').replace(
        "</robot>", '<link name="l2"><inertial><origin xyz="0.2 0 0.1"/><mass value="2"/><inertia ixx="0.1" ixy="0" '
        'ixz="0" iyy="0.2" iyz="0" izz="0.3"/></inertial></link><joint name="j2" type="prismatic"><parent link="l1"/>'
        '<child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 0 -2"/><limit lower="-1" upper="1" effort="1" '
        'velocity="1"/></joint></robot>')
    path = write(tmp_path, text)
    with pytest.warns(JaxdynWarning, match=r"joint 'j1'/axis: axis \[1.0, 1.0, 0.0\] is not a unit vector"):
        m = jaxdyn.load_urdf(path)
    pin = pytest.importorskip("pinocchio")
    pm = pin.buildModelFromUrdf(path)
    q, v, tau = np.array([0.4, -0.3]), np.array([1.0, -2.0]), np.array([0.5, 3.0])
    np.testing.assert_allclose(jaxdyn.aba(m, q, v, tau), pin.aba(pm, pm.createData(), q, v, tau), rtol=1e-12, atol=1e-12)


def test_urdf_errors_name_file_and_element(tmp_path):
    assert jaxdyn.load_urdf(write(tmp_path, GOOD)).nb == 1
    with pytest.raises(URDFError, match=r"bad\.urdf: not valid XML"):
        jaxdyn.load_urdf(write(tmp_path, "<robot><link", "bad.urdf"))
    with pytest.raises(URDFError, match=r"norobot\.urdf: root element is <foo>"):
        jaxdyn.load_urdf(write(tmp_path, "<foo/>", "norobot.urdf"))
    with pytest.raises(URDFError, match=r"r\.urdf: joint 'j1': parent link 'nope' does not exist"):
        jaxdyn.load_urdf(write(tmp_path, GOOD.replace('parent link="base"', 'parent link="nope"')))
    cyc = GOOD.replace("</robot>", """<link name="l2"/><link name="l3"/>
      <joint name="a" type="fixed"><parent link="l2"/><child link="l3"/></joint>
      <joint name="b" type="fixed"><parent link="l3"/><child link="l2"/></joint></robot>""")
    with pytest.raises(URDFError, match=r"cycle"):
        jaxdyn.load_urdf(write(tmp_path, cyc))
    with pytest.raises(URDFError, match=r"r\.urdf: link 'l1'/inertial/mass: attribute value='heavy' is not numeric"):
        jaxdyn.load_urdf(write(tmp_path, GOOD.replace('mass value="1"', 'mass value="heavy"')))
    with pytest.raises(URDFError, match=r"joint 'j1'/axis: axis \[0.0, 0.0, 0.0\] has no direction"):
        jaxdyn.load_urdf(write(tmp_path, GOOD.replace('xyz="0 0 1"', 'xyz="0 0 0"')))
    with pytest.raises(URDFError, match=r"link 'l1'.*negative mass"):
        jaxdyn.load_urdf(write(tmp_path, GOOD.replace('mass value="1"', 'mass value="-1"')))
    with pytest.raises(URDFError, match="no such file"):
        jaxdyn.load_urdf(str(tmp_path / "missing.urdf"))


def test_state_shapes_checked_at_call_entry():
    m = jaxdyn.robots.puma560()
    with pytest.raises(ShapeError, match=r"q must have shape \(6,\)"):
        jaxdyn.aba(m, np.zeros(5), np.zeros(6), np.zeros(6))
    with pytest.raises(ShapeError, match=r"qd must have shape \(6,\)"):
        jaxdyn.rnea(m, np.zeros(6), np.zeros((2, 6)), np.zeros(6))
    with pytest.raises(ShapeError, match=r"floating-point"):
        jaxdyn.crba(m, np.zeros(6, dtype=np.int32))
    with pytest.raises(ShapeError, match=r"f_ext must have shape \(nb, 6\)"):
        jaxdyn.rnea(m, np.zeros(6), np.zeros(6), np.zeros(6), f_ext=np.zeros((6, 3)))
    with pytest.raises(KeyError, match="no frame named 'hand'"):
        jaxdyn.frame_pose(m, np.zeros(6), "hand")


@pytest.mark.named_errors
def test_stack_states_convert_and_name_a_wrong_length():
    """A stack converts a member's state to its layout and back (one state or a batch), under
    jit too, and names the stack and the member when the state has the wrong length."""
    import jax
    st = jaxdyn.stack([jaxdyn.robots.puma560(), jaxdyn.robots.planar3()])
    x = np.arange(6.0).reshape(2, 3)
    for f in (lambda a: st.member_v(1, st.v(1, a)), jax.jit(lambda a: st.member_v(1, st.v(1, a)))):
        np.testing.assert_array_equal(f(x), x)
    with pytest.raises(ShapeError, match=r"member 1 \('planar3'\) needs v of shape \(\.\.\., 3\)"):
        st.v(1, np.ones(4))
    with pytest.raises(ShapeError, match="member 0"):
        st.q(0, np.ones(3))
    with pytest.raises(ShapeError, match=r"leading lane axis \(mass \(2, \d+\).*jax.vmap over its lanes"):
        jaxdyn.aba(st, st.q(0, np.zeros(6)), np.zeros(st.nv), np.zeros(st.nv))     # lanes without a vmap


def test_urdf_triangle_violation_warns_not_raises(tmp_path):
    """Real URDFs (ANYmal C camera links) violate I1 + I2 >= I3 slightly: warn, keep loading."""
    bad = GOOD.replace('ixx="0.1"', 'ixx="0.001"').replace('iyy="0.1"', 'iyy="0.001"')
    with pytest.warns(JaxdynWarning, match=r"link 'l1'/inertial/inertia.*triangle"):
        assert jaxdyn.load_urdf(write(tmp_path, bad)).nb == 1



def test_urdf_inertia_policy(tmp_path):
    """A non-physical link inertia: "warn" (default, loads as Pinocchio does) keeps it,
    "raise" raises naming file and link, "repair" gives the nearest valid inertia."""
    neg = write(tmp_path, GOOD.replace('ixx="0.1"', 'ixx="-0.1"'))
    with pytest.warns(JaxdynWarning, match=r"link 'l1'/inertial/inertia.*positive.*kept as given"):
        m = jaxdyn.load_urdf(neg)
    assert float(m.inertia[0, 0, 0]) == -0.1
    with pytest.raises(URDFError, match=r"r\.urdf: link 'l1'/inertial/inertia.*positive"):
        jaxdyn.load_urdf(neg, inertia="raise")
    with pytest.warns(JaxdynWarning, match=r"repaired"):
        m = jaxdyn.load_urdf(neg, inertia="repair")
    lam = np.linalg.eigvalsh(np.asarray(m.inertia[0]))
    assert lam.min() >= 0 and lam[0] + lam[1] >= lam[2] - 1e-15
    np.testing.assert_allclose(lam, [0.0, 0.1, 0.1], atol=1e-15)   # nearest: -0.1 clipped to 0
    assert jaxdyn.validate(m) == []
    # round-off (icub.urdf: one entry 1.4e-20) is not an error at all
    tiny = write(tmp_path, GOOD.replace('ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"',
                                        'ixx="0" ixy="0" ixz="1.4e-20" iyy="0" iyz="0" izz="0"'), "tiny.urdf")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jaxdyn.load_urdf(tiny, inertia="raise").nb == 1


# ---- runtime arguments -----------------------------------------------------------------------

def test_runtime_argument_catalogue():
    """Each bad runtime argument raises its named jaxdyn exception, never a generic error."""
    import jax
    from jaxdyn.errors import ArgumentError
    m = jaxdyn.robots.puma560()
    z = np.zeros(6)
    cases = [
        (lambda: jaxdyn.aba(m, None, z, z), ShapeError, r"q must be an array.*got NoneType"),
        (lambda: jaxdyn.rnea(m, z, z, None), ShapeError, r"qdd must be an array"),
        (lambda: jax.jit(jaxdyn.aba)(m, [0.0] * 6, z, z), ShapeError, r"q must be an array.*got list"),
        (lambda: jaxdyn.rnea(m, z, z, z, gravity=np.zeros(2)), ShapeError, r"gravity must have shape \(3,\)"),
        (lambda: jaxdyn.aba(m, z, z, z, gravity=np.zeros((3, 1))), ShapeError, r"gravity must have shape \(3,\)"),
        (lambda: jax.vmap(jaxdyn.aba, (None, 0, 0, 0, None, None))(m, np.zeros((2, 6)), np.zeros((2, 6)),
                                                                  np.zeros((2, 6)), None, np.zeros(4)),
         ShapeError, r"gravity"),
        (lambda: jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, np.zeros((2, 6), np.int64), np.zeros((2, 6)),
                                                      np.zeros((2, 6))), ShapeError, r"q must be a floating-point array"),
        (lambda: jaxdyn.minv(m, z, method="magic"), ArgumentError, r"unknown minv method 'magic'"),
        (lambda: jaxdyn.aba_derivatives(m, z, z, z, method="fd"), ArgumentError, r"method must be one of"),
        (lambda: jaxdyn.stack([]), ArgumentError, r"stack needs at least one model"),
    ]
    for fn, exc, pat in cases:
        with pytest.raises(exc, match=pat):
            fn()


# ---- URDF data decisions (Pinocchio as the reference) ----------------------------------------

ONE = """<robot name="r"><link name="base"/>
<link name="l1"><inertial><origin xyz="0.1 0 0"/>MASS INERTIA</inertial></link>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>LIMIT</joint>
<link name="l2"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
<limit lower="-1" upper="1" effort="1" velocity="1"/>MIMIC</joint></robot>"""
_LIM = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'
_I = '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/>'


def _one(mass='<mass value="2"/>', inertia=_I, limit=_LIM, mimic=""):
    return ONE.replace("MASS", mass).replace("INERTIA", inertia).replace("LIMIT", limit).replace("MIMIC", mimic)


@pytest.mark.parametrize("kw,warn", [
    (dict(mass="<mass/>"), r"<mass> has no value; the whole <inertial> is ignored"),
    (dict(mass=""), r"<mass> is missing; the whole <inertial> is ignored"),
    (dict(inertia='<inertia ixx="0.1" iyy="0.2" izz="0.3"/>'), r"missing ixy, ixz, iyz; rotational inertia taken as zero"),
    (dict(inertia=""), r"missing <inertia>"),
    (dict(mimic='<mimic joint="j1" multiplier="2"/>'), r"<mimic> is ignored"),
])
def test_incomplete_urdf_data_reads_as_pinocchio(tmp_path, kw, warn):
    """What jaxdyn keeps of incomplete data equals what Pinocchio keeps: same aba, and a warning."""
    pin = pytest.importorskip("pinocchio")
    text = _one(**kw)
    with pytest.warns(JaxdynWarning, match=warn):
        m = jaxdyn.load_urdf(write(tmp_path, text))
    pm = pin.buildModelFromXML(text)
    q, v, tau = np.array([0.3, -0.4]), np.array([0.5, 1.0]), np.array([0.2, -0.1])
    np.testing.assert_allclose(jaxdyn.rnea(m, q, v, tau), pin.rnea(pm, pm.createData(), q, v, tau), atol=1e-12)


def test_urdf_value_decisions(tmp_path):
    import warnings as w
    with pytest.raises(URDFError, match=r"link 'l1'/inertial/mass: mass 1e\+308 kg exceeds"):
        jaxdyn.load_urdf(write(tmp_path, _one(mass='<mass value="1e308"/>')))
    # revolute without <limit>: accepted with infinite limits (documented)
    with w.catch_warnings():
        w.simplefilter("error")
        m = jaxdyn.load_urdf(write(tmp_path, _one(limit="")))
    assert np.isinf(m.q_lower[0]) and np.isinf(m.q_upper[0]) and m.q_lower[1] == -1.0
    # a directory is named as such
    with pytest.raises(URDFError, match="is a directory"):
        jaxdyn.load_urdf(str(tmp_path))


def test_urdf_errors_name_the_path_once(tmp_path):
    p = write(tmp_path, GOOD.replace('ixx="0.1"', 'ixx="-0.1"'), "once.urdf")
    with pytest.raises(URDFError) as e:
        jaxdyn.load_urdf(p, inertia="raise")
    assert str(e.value).count("once.urdf") == 1


def test_triangle_warning_printed_once(tmp_path):
    bad = GOOD.replace('ixx="0.1"', 'ixx="0.001"').replace('iyy="0.1"', 'iyy="0.001"')
    import warnings as w
    with w.catch_warnings(record=True) as rec:
        w.simplefilter("always")
        jaxdyn.load_urdf(write(tmp_path, bad))
    assert len([r for r in rec if "triangle" in str(r.message)]) == 1


def test_long_chain_loads_iteratively(tmp_path):
    """2,000 links: no RecursionError; body order as Pinocchio's; gravity torques of the
    straight chain (axes y, gravity -z) equal the closed form -g sum_{k>=i} m (x_k + 0.05 - x_i)."""
    n = 2000
    links = ['<link name="l0"/>'] + [
        f'<link name="l{i}"><inertial><mass value="1"/><origin xyz="0.05 0 0"/><inertia ixx="0.01" ixy="0" '
        f'ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>' for i in range(1, n + 1)]
    joints = [f'<joint name="j{i:05d}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
              f'<origin xyz="0.1 0 0"/><axis xyz="0 1 0"/>{_LIM}</joint>' for i in range(1, n + 1)]
    p = write(tmp_path, '<robot name="chain">' + "".join(links) + "".join(joints) + "</robot>", "chain.urdf")
    m = jaxdyn.load_urdf(p)
    assert m.nb == n
    pin = pytest.importorskip("pinocchio")
    assert list(m.joint_names) == list(pin.buildModelFromUrdf(p).names)[1:]
    x = 0.1 * np.arange(1, n + 1)
    ref = np.array([-9.81 * np.sum(x[i:] + 0.05 - x[i]) for i in range(n)])
    np.testing.assert_allclose(jaxdyn.gravity_torques(m, np.zeros(n)), ref, rtol=1e-12)


def test_empty_tree_loads_and_runs(tmp_path):
    """All joints fixed (quadrotor_base.urdf, iris_simple.urdf): nq = nv = 0, as Pinocchio."""
    text = """<robot name="quad"><link name="base"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0"
      iyy="0.1" iyz="0" izz="0.1"/></inertial></link><link name="rotor"/>
      <joint name="rj" type="fixed"><parent link="base"/><child link="rotor"/><origin xyz="0.2 0 0"/></joint></robot>"""
    m = jaxdyn.load_urdf(write(tmp_path, text))
    assert (m.nb, m.nq, m.nv) == (0, 0, 0)
    z = np.zeros(0)
    assert jaxdyn.aba(m, z, z, z).shape == (0,) and jaxdyn.crba(m, z).shape == (0, 0)
    np.testing.assert_allclose(jaxdyn.frame_pose(m, z, "rotor")[1], [0.2, 0, 0])
    assert jaxdyn.rollout(m, z, z, None, steps=2).q.shape == (3, 0)
    for fn in (jaxdyn.aba_derivatives, jaxdyn.rnea_derivatives):
        for method in ("analytic", "autodiff"):
            assert [d.shape for d in fn(m, z, z, z, method=method)] == [(0, 0)] * 3, (fn.__name__, method)
        Z = np.zeros((5, 0))
        assert [d.shape for d in jax.vmap(fn, (None, 0, 0, 0))(m, Z, Z, Z)] == [(5, 0, 0)] * 3, fn.__name__


def test_singular_tree_is_nan_other_trees_exact():
    """A massless leaf makes its own tree NaN (the documented rule); a second tree hanging from
    the world stays equal to that tree simulated alone."""
    args = base_args(3)
    args.update(parent=[-1, 0, -1], mass=np.array([1.0, 0.0, 2.0]),
                inertia=np.stack([np.eye(3) * 0.1, np.zeros((3, 3)), np.eye(3) * 0.2]),
                axis=np.array([[0, 1.0, 0], [0, 1.0, 0], [0, 1.0, 0]]),
                Xtree_r=np.array([[0, 0, 0], [0.5, 0, 0], [0, 0, 1.0]]), com=np.array([[0.2, 0, 0], [0, 0, 0], [0.3, 0, 0]]))
    m = jaxdyn.build_model(**args)
    q, v, tau = np.array([0.1, 0.2, 0.3]), np.array([0.5, -0.5, 1.0]), np.array([1.0, 0.0, -1.0])
    qdd = np.asarray(jaxdyn.aba(m, q, v, tau))
    assert np.all(np.isnan(qdd[:2])) and np.isfinite(qdd[2])
    alone = dict(base_args(1), parent=[-1], mass=np.array([2.0]), inertia=np.eye(3)[None] * 0.2,
                 axis=np.array([[0, 1.0, 0]]), Xtree_r=np.array([[0, 0, 1.0]]), com=np.array([[0.3, 0, 0]]))
    ref = jaxdyn.aba(jaxdyn.build_model(**alone), q[2:], v[2:], tau[2:])
    np.testing.assert_allclose(qdd[2], ref[0], rtol=1e-14)
    qb = np.asarray(jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, q[None], v[None], tau[None]))[0]
    assert np.array_equal(np.isnan(qb), np.isnan(qdd))


def test_floating_base_far_from_origin():
    """Every method is invariant to translating a floating base (uniform gravity): at 1000 km
    from the origin nothing loses digits (crba did: 1e-4 relative)."""
    import jax
    m = jaxdyn.robots.random_tree(7, 0.5, 141, floating_base=True)
    assert len(set(m.types)) == 7
    rng = np.random.default_rng(0)
    q = np.array(jaxdyn.random_configuration(m, jax.random.PRNGKey(2)))
    v, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)

    @jax.jit
    def all_methods(q):
        out = {meth: jaxdyn.forward_dynamics(m, q, v, tau, method=meth) for meth in jaxdyn.methods()}
        out.update(crba=jaxdyn.crba(m, q), rnea=jaxdyn.rnea(m, q, v, tau), minv=jaxdyn.minv(m, q, method="cholesky"),
                   wrench=jaxdyn.virtual_work(m, q, v, tau)[1], ke=jaxdyn.kinetic_energy(m, q, v))
        return out

    Q = np.stack([q] + [q + np.concatenate([d * np.array([1.0, -0.7, 0.3]), np.zeros(m.nq - 3)])
                        for d in (1e3, 1e6)])
    res = jax.vmap(all_methods)(Q)
    for k, x in res.items():
        x = np.asarray(x)
        scale = max(1.0, np.abs(x[0]).max())
        assert np.abs(x[1:] - x[0]).max() <= 1e-12 * scale, k


# ---- CLI and configs -----------------------------------------------------------------------

def _cli(capsys, *argv):
    from jaxdyn.cli import main
    rc = main(["simulate", *map(str, argv)])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("body,pattern", [
    ('[simulation]\nT = 0.001\ndt = 0.01', r"simulation\.T = 0\.001 is shorter than one step"),
    ('[simulation]\nmethod = "magic"', r"simulation\.method must be one of \[.*'aba'"),
    ('[simulation]\nT = 1e12', r"1e\+14 samples; at most"),
])
def test_cli_config_errors_exit_2_one_line(tmp_path, capsys, body, pattern):
    import re
    p = tmp_path / "c.toml"
    p.write_text('[robot]\nname = "planar3"\n' + body + "\n")
    rc, err = _cli(capsys, p)
    assert rc == 2 and re.search(pattern, err) and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


_DAMPED_URDF = """<robot name="damped"><link name="base"/>
  <link name="arm"><inertial><origin xyz="0 0 0"/><mass value="1"/>
    <inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="5"/><dynamics damping="1.0"/></joint></robot>"""


@pytest.mark.parametrize("tool", ["simulate", "trajopt"])
def test_cli_fixed_step_too_long_for_the_joint_damping_is_named(tmp_path, capsys, tool):
    """A link of 0.01 kg m^2 on a joint damped at 1 N m s decays at 100 1/s: RK4 is stable only
    for dt <= 2.7853 / 100 s.  At dt = 0.05 both tools exit 2 before computing, naming the
    config key, the rate and the longest stable step; at dt = 0.02 the simulation runs."""
    from jaxdyn.cli import main
    urdf = tmp_path / "damped.urdf"
    urdf.write_text(_DAMPED_URDF)
    table, integrator = ("simulation", "integrator") if tool == "simulate" else ("problem", "stepper")
    extra = "" if tool == "simulate" else "q_final = [0.5]\n"
    for dt in (0.05, 0.02) if tool == "simulate" else (0.05,):
        cfg = tmp_path / f"c{dt}.toml"
        cfg.write_text(f'[robot]\nname = "urdf:{urdf}"\n[{table}]\nT = 0.4\ndt = {dt}\n{integrator} = "rk4"\n{extra}')
        rc = main([tool, str(cfg), "--out", str(tmp_path / f"o{dt}")])
        err = capsys.readouterr().err
        if dt == 0.05:
            assert rc == 2 and len(err.strip().splitlines()) == 1, err
            assert re.search(rf"{table}\.dt = 0\.05 s is too long for 'rk4'.* decays at 100 1/s.*"
                             r"dt <= 0\.0279 s: a rollout would diverge; use dt <= 0\.027 s", err), err
        else:
            assert rc == 0, err


def test_closed_chain_fixed_step_check_uses_the_motions_the_loop_allows(tmp_path, capsys):
    """On a four-bar (one degree of freedom) with damped joints, the rate is that of the one
    motion the loop allows: n^T D n / n^T M n for n a velocity projected onto the constraints."""
    from test_apps_cli import _FOURBAR
    from jaxdyn.cli import main
    from jaxdyn.constraints import project_constraints
    xml = tmp_path / "fourbar.xml"
    xml.write_text(_FOURBAR.replace('type="hinge"', 'type="hinge" damping="0.3"'))
    cm = jaxdyn.load_mjcf(str(xml))
    q0 = np.asarray(project_constraints(cm, np.array([0.3, -0.3, 0.0]), np.zeros(3))[0])
    n = np.asarray(project_constraints(cm, q0, np.array([1.0, 0.4, -0.7]))[1])
    M = np.asarray(jaxdyn.crba(cm.model, q0))
    rate = 0.3 * (n @ n) / (n @ M @ n)
    M_tree = np.linalg.eigvalsh(M).min()
    assert rate < 0.3 / M_tree                                 # below the open tree's fastest rate
    cfg = tmp_path / "c.toml"
    dt = 3.0 / rate                                          # unstable for rk4 (2.785 / rate)
    cfg.write_text(f'[robot]\nname = "mjcf:{xml}"\n[simulation]\nT = {2 * dt}\ndt = {dt}\nintegrator = "rk4"\n')
    assert main(["simulate", str(cfg), "--out", str(tmp_path / "o")]) == 2
    got = float(re.search(r"decays at ([\d.e+-]+) 1/s", capsys.readouterr().err).group(1))
    assert abs(got - rate) <= 1e-3 * rate


def test_closed_chain_that_does_not_assemble_is_named(tmp_path, capsys):
    """A mechanism whose loops cannot close, or a start the projection cannot leave, raises a
    ModelError naming the constraint and its residual (never a q0 off the manifold); the CLI
    exits 2 naming the config key."""
    from jaxdyn.constraints import check_assembled, constraint_residual, project_constraints
    import re
    with pytest.raises(jaxdyn.ModelError, match=r"four_bar.*'pin' residual") as e:
        jaxdyn.mechanisms.four_bar(ground=10.0)
    # the pivot is 10 m from the crank's axis and the links reach 4.5 m at most
    assert float(re.search(r"'pin' residual ([\d.e+-]+)", str(e.value)).group(1)) >= 5.5
    cm, q0 = jaxdyn.mechanisms.four_bar()
    assert np.abs(np.asarray(constraint_residual(cm, check_assembled(cm, q0, "t")))).max() <= 1e-10
    q, _ = project_constraints(cm, np.zeros(3), np.zeros(3))    # straight chain: a singular start
    with pytest.raises(jaxdyn.ModelError, match=r"start: .*'pin' residual 2\.5"):
        check_assembled(cm, q, "start")
    p = tmp_path / "c.toml"
    p.write_text('[robot]\nname = "four_bar"\n[simulation]\nT = 0.01\ndt = 0.001\nmethod = "schur"\n'
                 '[initial]\nq0 = [0.0, 0.0, 0.0]\n')
    rc, err = _cli(capsys, p, "--out", tmp_path / "o")
    assert rc == 2 and "initial.q0" in err and "'pin' residual" in err and "Traceback" not in err, err


def test_cli_paths(tmp_path, capsys):
    rc, err = _cli(capsys, tmp_path)                      # a directory as config
    assert rc == 2 and "is a directory" in err
    f = tmp_path / "file"
    f.write_text("x")
    rc, err = _cli(capsys, "planar3_freefall", "--out", f)  # --out naming a file
    assert rc == 2 and "is not a directory" in err
    rc, err = _cli(capsys, "planar3_freefall", "--robot", f"urdf:{tmp_path}")
    assert rc == 2 and "is a directory" in err


def test_cli_nonfinite_run_fails_loudly(tmp_path, capsys):
    """Before: RKF45 looped to max_steps per sample and 'succeeded' with the initial state.  The
    message names the time, the quantity and the joint whose motion meets no inertia (the
    massless leaf 'tip' on joint 'wrist' makes M singular)."""
    text = GOOD.replace("</robot>", """<link name="tip"/>
      <joint name="wrist" type="revolute"><parent link="l1"/><child link="tip"/><origin xyz="0.5 0 0"/>
      <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>""")
    p = write(tmp_path, text.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>'), "leaf.urdf")
    rc, err = _cli(capsys, "planar3_freefall", "--robot", f"urdf:{p}", "--out", tmp_path / "o")
    assert rc == 3, err
    assert "non-finite at t = 0.01 s" in err and "joint '" in err
    assert "the mass matrix is singular there" in err and "the motion of 'wrist' meets no mass or inertia" in err
    # damped joints and a fixed step: no finite step is stable on a singular M; the run reports M
    damped = text.replace('velocity="1"/>', 'velocity="1"/><dynamics damping="0.5"/>')
    p = write(tmp_path, damped.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>'), "damped.urdf")
    cfg = tmp_path / "rk4.toml"
    cfg.write_text(f'[robot]\nname = "urdf:{p}"\n[simulation]\nT = 0.1\ndt = 0.01\nintegrator = "rk4"\n')
    rc, err = _cli(capsys, cfg, "--out", tmp_path / "o2")
    assert rc == 3 and "the motion of 'wrist' meets no mass or inertia" in err, err


def test_cli_output_folder_never_mixed_or_lost(tmp_path, capsys, monkeypatch):
    """#47 item 4: a second run into a used --out goes to a fresh <out>-2 and says so (before:
    a forced run's torques.png landed beside a free-fall trajectory); an --out that cannot be
    made is named before anything is computed (before: an OSError traceback after the run);
    Ctrl-C ends with exit 130 and one line (#47 item 7)."""
    import jaxdyn.cli
    out = tmp_path / "run"
    rc, _ = _cli(capsys, "planar3_freefall", "--out", out)
    assert rc == 0
    first = sorted(p.name for p in out.iterdir())
    rc, err = _cli(capsys, "planar3_forced", "--out", out)
    assert rc == 0 and f"writing to {out}-2" in err
    assert sorted(p.name for p in out.iterdir()) == first and "torques.png" not in first
    assert "torques.png" in {p.name for p in (tmp_path / "run-2").iterdir()}
    f = tmp_path / "file"
    f.write_text("x")
    called = []
    monkeypatch.setattr(jaxdyn.cli, "_run", lambda *a: called.append(1))
    rc, err = _cli(capsys, "planar3_freefall", "--out", f / "sub")
    assert rc == 2 and "cannot be written" in err and str(f / "sub") in err and not called

    def interrupted(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(jaxdyn.cli, "_run", interrupted)
    rc, err = _cli(capsys, "planar3_freefall", "--out", tmp_path / "int")
    assert rc == 130 and err.strip() == f"jaxdyn: simulate interrupted (removed its output folder {tmp_path / 'int'})"
    assert not (tmp_path / "int").exists()          # nothing half-written is left


# A process started with SIGINT ignored (a background job of a non-interactive shell, and every
# process it starts) never sees Ctrl-C: Python installs its KeyboardInterrupt handler only where
# SIGINT has its default action.  The commands below run as from a terminal whatever the test run
# inherited.
_AS_FROM_A_TERMINAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def test_sigint_during_trajopt_compile(tmp_path):
    """#47 item 7: Ctrl-C (a real SIGINT) while ``jaxdyn trajopt`` traces and compiles ends
    with exit 130, one line on stderr, and no output folder (before: a segfault, exit 139, 2
    of 2 tries, with the progress bar's host callback inside the compiled program; then, with a
    SIGINT during XLA's compilation, the line and a SIGSEGV while the interpreter shut down
    under XLA's compiler threads)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}     # the command as users run it
    command = _AS_FROM_A_TERMINAL + "import sys\nfrom jaxdyn.cli import entry\nentry(sys.argv[1:])\n"
    p = subprocess.Popen([sys.executable, "-c", command, "trajopt", "--out", str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = []
    while p.poll() is None:                      # set up until "compiling ...": XLA from here on
        head.append(p.stderr.readline())
        if head[-1].startswith("compiling"):
            break
    time.sleep(4.0)                              # inside XLA's compilation of the first round
    assert p.poll() is None, "trajopt ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("trajopt did not stop within 120 s of SIGINT")
    err = "".join(head) + err
    lines = [line for line in err.strip().splitlines() if line.startswith("jaxdyn")]
    assert p.returncode == 130 and "Traceback" not in err, err
    assert lines[-1] == f"jaxdyn: trajopt interrupted (removed its output folder {out})", err
    assert not out.exists()


def test_ctrl_c_inside_a_gc_callback_is_not_lost():
    """A KeyboardInterrupt raised inside a garbage-collector callback (JAX registers one; Ctrl-C
    landed there once in this suite's SIGINT test) is one Python reports as "Exception ignored"
    and drops: the command must still end with exit 130 and its one line, not finish the run
    and exit 0."""
    import subprocess
    import sys
    script = _AS_FROM_A_TERMINAL + (
        "import gc, sys, time\n"
        "import jaxdyn.cli as cli\n"
        "def cb(phase, info):\n"
        "    if phase == 'start':\n"
        "        gc.callbacks.remove(cb)\n"
        "        raise KeyboardInterrupt\n"
        "def work(args):\n"
        "    gc.callbacks.append(cb)\n"
        "    gc.collect()\n"
        "    t0 = time.perf_counter()\n"
        "    while time.perf_counter() - t0 < 20:\n"
        "        pass\n"
        "    return 0\n"
        "cli._dispatch = work\n"
        "sys.exit(cli.main(['view', 'nowhere']))\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and p.stderr == "jaxdyn: view interrupted\n", (p.returncode, p.stderr)


_P2 = '[robot]\nname = "double_pendulum"\n[problem]\nT = 0.5\ndt = 0.05\nq_final = [0.1, 0.1]\n'
_PUMA = '[robot]\nname = "puma560"\n'


@pytest.mark.parametrize("cmd,text,match", [
    # #47 item 5: trajopt values that made garbage with exit 0, sizes that exhausted memory
    ("trajopt", _P2 + "[optimizer]\nrho = -1e5\n", r"optimizer\.rho must be > 0"),
    ("trajopt", _P2 + "[optimizer]\nrho = 0.0\n", r"optimizer\.rho must be > 0"),
    ("trajopt", _P2 + "[optimizer]\nlearning_rate = 0.0\n", r"optimizer\.learning_rate must be > 0"),
    ("trajopt", _P2 + "terminal = \"penalty\"\nterminal_weight = -1.0\n", r"problem\.terminal_weight must be > 0"),
    ("trajopt", _P2 + "actuated = [2, -1]\n", r"problem\.actuated must be 0 or 1"),
    ("trajopt", _P2 + "actuated = [0, 0]\n", r"problem\.actuated must be 0 or 1 per dof with at least one 1"),
    ("trajopt", _P2 + "tau_limit = [1e-300, 10.0]\n", r"problem\.tau_limit must be >= 1e-6"),
    ("trajopt", _P2 + "tau_limit = [nan, 10.0]\n", r"problem\.tau_limit contains NaN or inf"),   # +inf: unlimited
    ("trajopt", _P2 + "tau_limit = [-inf, 10.0]\n", r"problem\.tau_limit contains NaN or inf"),
    ("trajopt", _P2 + "[optimizer]\nrho = inf\n", r"optimizer\.rho must be finite"),
    ("trajopt", _P2.replace("T = 0.5", "T = 1e7") + "", r"problem\.T / problem\.dt = 2e\+08 is more than"),
    ("trajopt", _P2 + "[optimizer]\niterations = 1000000000\n", r"optimizer\.iterations = 1e\+09 is more than"),
    ("trajopt", _P2 + "[optimizer]\nmultistart = 100000000\n", r"optimizer\.multistart = 1e\+08 is more than"),
    ("trajopt", _P2 + "[robust]\nbody = \"link2\"\nextra_masses = []\n", r"non-empty list extra_masses"),
    # identify
    ("identify", _PUMA + "[excitation]\nT = 1e9\n", r"excitation\.T / excitation\.dt = 5e\+10 samples"),
    ("identify", _PUMA + "[excitation]\nT = 0.001\n", r"excitation\.T / excitation\.dt = 0\.05 samples"),
    ("identify", _PUMA + "[validation]\nT = 0.001\n", r"validation\.T / excitation\.dt = 0\.05 samples"),
    ("identify", _PUMA + "[excitation]\nharmonics = 100000000\n", r"excitation\.harmonics = 100000000 is more"),
    ("identify", _PUMA + "[noise]\nseed = -1\n", r"noise\.seed must be >= 0"),
    ("identify", _PUMA + "[estimation]\nprior_weight = -1.0\n", r"estimation\.prior_weight must be >= 0"),
])
def test_tool_config_nonsense_is_named(tmp_path, capsys, cmd, text, match):
    """#47 items 5 and 10: every value above was accepted and ran (garbage written with exit 0,
    NaN held-out errors, or RESOURCE_EXHAUSTED after minutes); now exit 2, one line naming the key."""
    import re
    from jaxdyn.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    assert main([cmd, str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


_BALL = """<mujoco><worldbody><body name="ball" pos="0 0 1"><freejoint name="base"/>
<geom type="sphere" size="0.1" mass="1"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("cmd,section,key", [("trajopt", "problem", "q_final"), ("trajopt", "problem", "q0"),
                                             ("simulate", "initial", "q0")])
def test_zero_quaternion_is_named(tmp_path, capsys, cmd, section, key):
    """#47 item 10: a zero quaternion in a free joint's q (no rotation to renormalize to) was
    accepted (NaN targets and states); now exit 2 naming the key, the joint and 'quaternion'."""
    from jaxdyn.cli import main
    xml = tmp_path / "ball.xml"
    xml.write_text(_BALL)
    zero, unit = "[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]", "[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]"
    if cmd == "trajopt":
        text = (f'[robot]\nname = "mjcf:{xml}"\n[problem]\nT = 0.4\ndt = 0.05\n'
                f'q_final = {zero if key == "q_final" else unit}\nq0 = {zero if key == "q0" else unit}\n')
    else:
        text = f'[robot]\nname = "mjcf:{xml}"\n[simulation]\nT = 0.1\ndt = 0.01\n[initial]\nq0 = {zero}\n'
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    assert main([cmd, str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{section}.{key}: joint 'base' has a quaternion of norm 0" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()                # nothing written


@pytest.mark.parametrize("cmd", ["simulate", "identify", "trajopt"])
def test_robot_without_joints_is_named(tmp_path, capsys, cmd):
    """A robot whose joints are all fixed (nq = nv = 0, example-robot-data's quadrotor_base.urdf)
    crashed `simulate` with a traceback after the run; now each tool exits 2 before it writes
    anything, naming the robot."""
    from jaxdyn.cli import main
    urdf = tmp_path / "quad.urdf"
    urdf.write_text('<robot name="quad"><link name="base"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" '
                    'ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link></robot>')
    text = f'[robot]\nname = "urdf:{urdf}"\n'
    if cmd == "trajopt":
        text += "[problem]\nT = 0.4\ndt = 0.05\nq_final = []\n"
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    assert main([cmd, str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "robot 'quad' has no degrees of freedom" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_mjcf_with_equalities_runs_as_a_closed_chain_in_the_tools(tmp_path, capsys):
    """An MJCF file with connect / weld equalities loads as a closed chain: the tools used to
    take the ClosedModel for a tree and crash (AttributeError); now simulate projects its
    initial state onto the constraints (this file's loops cannot close: named), refuses the
    tree-only methods, and identify asks for an open chain."""
    from jaxdyn.cli import main
    xml = os.path.join(os.path.dirname(__file__), "data", "mjcf_equalities.xml")
    cases = [("simulate", "", r"closed chain 'equalities' is not assembled after projection"),
             ("simulate", 'method = "udut"\n', r"simulation\.method must be one of \['schur', 'kkt', 'aba'\], got 'udut'"),
             ("identify", None, r"identify needs an open-chain robot")]
    for cmd, method, match in cases:
        text = f'[robot]\nname = "mjcf:{xml}"\n'
        if method is not None:
            text += "[simulation]\nT = 0.05\ndt = 0.01\n" + method
        cfg = tmp_path / "c.toml"
        cfg.write_text(text)
        assert main([cmd, str(cfg), "--out", str(tmp_path / "o")]) == 2, (cmd, method)
        err = capsys.readouterr().err
        assert re.search(match, err) and "Traceback" not in err, err
        assert not (tmp_path / "o").exists()


def _data(path, rows, nv=6, extra=None, encoding="utf-8", bom=False):
    cols = [f"{p}{i + 1}" for p in ("q", "qd", "qdd", "tau") for i in range(nv)] + (extra or [])
    text = ",".join(cols) + "\n" + "\n".join(",".join(f"{v:g}" for v in r) for r in rows) + "\n"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode(encoding))
    return path


def test_identify_data_files_are_read_or_named(tmp_path, capsys):
    """#47 item 6: a non-UTF-8 CSV, rows longer than the header (read with shifted columns
    before), values of 1e300, one row (an exact fit reported as perfect) are named errors; a
    byte-order mark is read (before: 'missing column q1'); data.file is relative to the config's
    folder (before: the working folder)."""
    from jaxdyn.apps.identify_cli import read_data
    from jaxdyn.cli import main
    m = jaxdyn.robots.puma560()
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(5, 24))
    plain = read_data(str(_data(tmp_path / "a.csv", rows)), m)
    with_bom = read_data(str(_data(tmp_path / "b.csv", rows, bom=True)), m)
    for x, y in zip(plain, with_bom):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(plain[3], rows[:, 18:], rtol=1e-5)       # tau columns where the header says
    bad = tmp_path / "latin.csv"
    bad.write_bytes(",".join(f"{p}{i + 1}" for p in ("q", "qd", "qdd", "tau") for i in range(6)).encode()
                    + b"\n" + b"\xe9" * 10 + b"\n")
    long = tmp_path / "long.csv"
    long.write_text((tmp_path / "a.csv").read_text().replace("\n", ",7\n").replace(",7\n", "\n", 1))
    huge = _data(tmp_path / "huge.csv", np.where(np.arange(24) == 5, 1e300, rows))
    for f, match in ((bad, "not UTF-8"), (long, "row 1: 25 fields, the header has 24"),
                     (huge, "implausible")):
        with pytest.raises(jaxdyn.errors.ConfigError, match=match):
            read_data(str(f), m)
    sub = tmp_path / "cfgdir"
    sub.mkdir()
    nan_rows = rows.copy()
    nan_rows[3, 7] = np.nan
    _data(sub / "d.csv", nan_rows)
    (sub / "c.toml").write_text(_PUMA + '[data]\nfile = "d.csv"\n')
    assert main(["identify", str(sub / "c.toml"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "row 4" in err and "qd2" in err, err                          # found beside the config, read
    _data(sub / "one.csv", rows[:1])
    (sub / "one.toml").write_text(_PUMA + '[data]\nfile = "one.csv"\n[excitation]\nT = 2.0\n')
    assert main(["identify", str(sub / "one.toml"), "--out", str(tmp_path / "o1")]) == 2
    assert "1 samples give 6 equations" in capsys.readouterr().err


@pytest.mark.parametrize("config", ["four_bar", "quadruped_stand", "three_arms_box"])
def test_closed_config_with_robot_says_what_it_needs(tmp_path, capsys, config):
    """#47 item 8: before, 'stabilization applies to closed models only' or a plain
    ValueError "unknown forward-dynamics method 'schur'"."""
    from helpers import urdf_path
    rc, err = _cli(capsys, config, "--robot", f"urdf:{urdf_path('ur5')}", "--out", tmp_path / "o")
    assert rc == 2 and "is for a closed chain" in err and "tree config" in err, err


def test_closed_chain_api_catalogue():
    """#47 items 9-10: each input below got a TypeError / KeyError / AttributeError / JAX
    hashing error or was accepted; now a named jaxdyn error saying what is wrong."""
    from jaxdyn.errors import ArgumentError, ModelError
    cm, q0 = jaxdyn.mechanisms.four_bar()
    m, z = cm.model, np.zeros(cm.model.nv)
    gs, _ = jaxdyn.mechanisms.arms_holding_box(2, form="grasp")
    quad, qq = jaxdyn.mechanisms.quadruped()
    arm = jaxdyn.robots.puma560()
    f0 = m.frame_names[-1]
    cases = [
        (ModelError, "needs a tree Model", lambda: jaxdyn.close_loops(None, [])),
        (ModelError, "got ClosedModel", lambda: jaxdyn.close_loops(cm, [jaxdyn.Constraint("point", f0)])),
        (ModelError, "must be a list of jaxdyn.Constraint", lambda: jaxdyn.close_loops(m, None)),
        (ModelError, "unknown kind", lambda: jaxdyn.close_loops(m, [jaxdyn.Constraint(["point"], f0)])),
        (ModelError, "matrix of numbers", lambda: jaxdyn.close_loops(m, [jaxdyn.Constraint("subspace", f0,
                                                                                           subspace="abc")])),
        (ModelError, "unknown kind 'ball'", lambda: jaxdyn.Constraint("ball", "tip").rows),
        (ModelError, r"names \['c'\] are repeated", lambda: jaxdyn.close_loops(
            m, [jaxdyn.Constraint("point", f0, name="c"), jaxdyn.Constraint("point", m.frame_names[0], name="c")])),
        (ArgumentError, "two finite Baumgarte gains", lambda: jaxdyn.constrained_forward_dynamics(
            cm, q0, z, z, stabilization=(1.0,))),
        (ArgumentError, "two finite Baumgarte gains", lambda: jaxdyn.constrained_forward_dynamics(
            cm, q0, z, z, stabilization=(-1.0, 1.0))),
        (ArgumentError, "iters must be an int >= 0", lambda: jaxdyn.project_constraints(cm, q0, z, iters=-1)),
        (ArgumentError, "iters must be an int >= 0", lambda: jaxdyn.project_constraints(cm, q0, z, iters=2.5)),
        (ModelError, "pass its .model", lambda: jaxdyn.legged_system(quad, qq, ["LF_foot"])),
        (ModelError, "object must be a Model", lambda: jaxdyn.grasp_system(None, [arm], "ee", ["g"])),
        (ModelError, r"wrap a single arm as \[arm\]", lambda: jaxdyn.grasp_system(gs.obj, arm, "ee", ["grasp0"])),
        (ModelError, "contacts must be a kind", lambda: jaxdyn.grasp_system(gs.obj, [arm, arm], "ee",
                                                                             ["grasp0", "grasp1"], contacts=None)),
        (ModelError, "repeat a frame", lambda: jaxdyn.grasp_system(gs.obj, [arm, arm], "ee", ["grasp0", "grasp0"])),
        (ArgumentError, "contacts must be one kind", lambda: jaxdyn.mechanisms.arms_holding_box(2, contacts="glue")),
        (ArgumentError, "form must be 'closed' or 'legged'", lambda: jaxdyn.mechanisms.quadruped(form="x")),
    ]
    traj = jaxdyn.integrators.Trajectory(np.arange(2.0), np.stack([q0, q0 * np.nan]), np.zeros((2, m.nv)),
                                         np.zeros((2, m.nv)), 1, 0, False)
    cases += [(ArgumentError, "needs a Model", lambda: jaxdyn.integrators.first_nonfinite(gs, traj)),
              (ArgumentError, "needs a Trajectory", lambda: jaxdyn.integrators.first_nonfinite(m, (q0,)))]
    for err, match, call in cases:
        with pytest.raises(err, match=match):
            call()
    # a system holding its tree (before: AttributeError) reports as its tree does
    assert jaxdyn.integrators.first_nonfinite(cm, traj) == jaxdyn.integrators.first_nonfinite(m, traj)
    assert jaxdyn.integrators.first_nonfinite(cm, traj)[0] == 1
    # a list of gains is the tuple it means (before: JAX's non-hashable static argument error)
    a = jaxdyn.constrained_forward_dynamics(cm, q0, z, z, stabilization=[2.0, 3.0]).qdd
    b = jaxdyn.constrained_forward_dynamics(cm, q0, z, z, stabilization=(2.0, 3.0)).qdd
    np.testing.assert_array_equal(a, b)
