"""Bad input raises a named exception that names the offending item."""
import numpy as np
import pytest

import jaxdyn
from jaxdyn.errors import DHError, ModelError, ShapeError, URDFError


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
    with pytest.raises(URDFError, match=r"joint 'j1'/axis"):
        jaxdyn.load_urdf(write(tmp_path, GOOD.replace('xyz="0 0 1"', 'xyz="0 0 3"')))
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


def test_urdf_triangle_violation_warns_not_raises(tmp_path):
    """Real URDFs (ANYmal C camera links) violate I1 + I2 >= I3 slightly: warn, keep loading."""
    bad = GOOD.replace('ixx="0.1"', 'ixx="0.001"').replace('iyy="0.1"', 'iyy="0.001"')
    with pytest.warns(UserWarning, match=r"link 'l1'/inertial/inertia.*triangle"):
        assert jaxdyn.load_urdf(write(tmp_path, bad)).nb == 1



def test_urdf_inertia_policy(tmp_path):
    """A non-physical link inertia: "warn" (default, loads as Pinocchio does) keeps it,
    "raise" raises naming file and link, "repair" gives the nearest valid inertia."""
    neg = write(tmp_path, GOOD.replace('ixx="0.1"', 'ixx="-0.1"'))
    with pytest.warns(UserWarning, match=r"link 'l1'/inertial/inertia.*positive.*kept as given"):
        m = jaxdyn.load_urdf(neg)
    assert float(m.inertia[0, 0, 0]) == -0.1
    with pytest.raises(URDFError, match=r"r\.urdf: link 'l1'/inertial/inertia.*positive"):
        jaxdyn.load_urdf(neg, inertia="raise")
    with pytest.warns(UserWarning, match=r"repaired"):
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
