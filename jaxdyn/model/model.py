"""The Model: a static, hashable topology and traced physical parameters (MJX's split).

Bodies are numbered 0..nb-1 in topological order (``parent[i] < i``; ``-1`` is the world).
Body i is moved by joint i.  Its frame is the joint's child frame; ``Xtree[i]`` is the Plücker
transform from the parent body frame to the joint's parent-side frame (Featherstone's
``Xtree``), so ``Xup[i] = XJ[i] Xtree[i]``.

:class:`Topology` (static, part of the jit cache key): parents, joint types, names, frame
bodies, and what follows from them (q/v addresses, runs of bodies of one joint type, the
ancestor matrix).  Joint coordinates are laid out in body order, so body i's q and v are the
contiguous slices ``q[qaddr[i]:qaddr[i] + nq_i]`` and ``v[vaddr[i]:vaddr[i] + nv_i]``.

Array leaves of a :class:`Model` (``jax.grad``, ``jax.vmap`` and optax see these, and only
these):

========== ============== ===========================================================
field      shape          meaning
========== ============== ===========================================================
Xtree_E    (nb, 3, 3)     rotation part of Xtree
Xtree_r    (nb, 3)        translation part of Xtree (joint origin in the parent frame)
axis       (nb, 3)        unit joint axis in the joint frame
pitch      (nb,)          helical pitch (m / rad)
mass       (nb,)          link mass
com        (nb, 3)        center of mass in the body frame
inertia    (nb, 3, 3)     rotational inertia about the COM, body-frame axes
armature   (nv,)          rotor inertia added to the diagonal of M
damping    (nv,)          viscous joint damping (``forward_dynamics`` and rollouts)
friction   (nv,)          Coulomb joint friction, the torque magnitude opposing motion (URDF
                          ``<dynamics friction>``, MJCF ``frictionloss``; Pinocchio's
                          ``model.friction``).  Identified by :mod:`jaxdyn.apps.sysid`; *not*
                          applied by ``forward_dynamics`` or rollouts (as Pinocchio's ``aba``)
q_lower    (nq,)          lower position limits (-inf if none)
q_upper    (nq,)          upper position limits (+inf if none)
effort_limit (nv,)        largest |tau| of each dof (+inf if none; URDF ``<limit effort>``, MJCF motors)
velocity_limit (nv,)      largest |qd| of each dof (+inf if none; URDF ``<limit velocity>``)
frame_E    (nf, 3, 3)     Plücker transform body -> frame of each named frame
frame_r    (nf, 3)
gravity    (3,)           gravity in world coordinates
========== ============== ===========================================================
"""
from __future__ import annotations

import dataclasses
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError, ShapeError
from . import joints as J
from .topology import TOPOLOGY_FIELDS as TOPOLOGY_FIELDS, JointGroup as JointGroup, Run as Run, Topology as Topology
from .validate import check_inertia

PARAM_FIELDS = ("Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia", "armature", "damping",
                "friction", "q_lower", "q_upper", "effort_limit", "velocity_limit", "frame_E", "frame_r", "gravity")
"""Array leaves of a Model."""


@no_type_check  # a pytree node: JAX rebuilds it with arbitrary leaves inside transformations
@dataclasses.dataclass(frozen=True)
class Model:
    """A kinematic tree: a static :class:`Topology` and its physical parameters as arrays
    (leading axis nb, topological order; joint placements Xtree as (E, r) in the parent body
    frame, COM and inertia in the body frame).  Build with :func:`build_model`,
    :func:`jaxdyn.load_urdf` or :func:`jaxdyn.from_dh`."""
    Xtree_E: jax.Array
    Xtree_r: jax.Array
    axis: jax.Array
    pitch: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    armature: jax.Array
    damping: jax.Array
    friction: jax.Array
    q_lower: jax.Array
    q_upper: jax.Array
    effort_limit: jax.Array
    velocity_limit: jax.Array
    frame_E: jax.Array
    frame_r: jax.Array
    gravity: jax.Array
    topology: Topology = None
    name: str = "model"

    # -- the topology, as numpy arrays and sizes
    @property
    def nb(self) -> int:
        return self.topology.nb

    @property
    def nq(self) -> int:
        return self.topology.nq

    @property
    def nv(self) -> int:
        return self.topology.nv

    @property
    def parent(self) -> np.ndarray:
        """(nb,) int32 parent of each body (-1: the world)."""
        return np.asarray(self.topology.parent, np.int32).reshape(self.nb)

    @property
    def jtype(self) -> np.ndarray:
        """(nb,) int32 joint type codes (:mod:`jaxdyn.model.joints`)."""
        return np.asarray(self.topology.jtype, np.int32).reshape(self.nb)

    @property
    def types(self) -> tuple:
        """The joint types present, sorted."""
        return tuple(sorted(set(self.topology.jtype)))

    @property
    def runs(self) -> tuple:
        return self.topology.runs

    @property
    def body_names(self) -> tuple:
        return self.topology.body_names

    @property
    def joint_names(self) -> tuple:
        return self.topology.joint_names

    @property
    def frame_names(self) -> tuple:
        return self.topology.frame_names

    @property
    def frame_body(self) -> np.ndarray:
        """(nf,) int32 body of each named frame (-1: the world)."""
        return np.asarray(self.topology.frame_body, np.int32).reshape(len(self.topology.frame_body))

    def joint_q(self, i: int) -> slice:
        """The slice of q that holds body i's joint coordinates."""
        a = self.topology.qaddr
        return slice(int(a[i]), int(a[i + 1]))

    def joint_v(self, i: int) -> slice:
        """The slice of v (qd, qdd, tau) that holds body i's joint velocities."""
        a = self.topology.vaddr
        return slice(int(a[i]), int(a[i + 1]))

    @property
    def qidx(self) -> np.ndarray:
        """(nb, max nq) int: the q index of each joint coordinate, nq on unused slots (numpy)."""
        return self._slots(self.topology.qaddr, self.nq)

    @property
    def vidx(self) -> np.ndarray:
        """(nb, max nv) int: the v index of each joint dof, nv on unused slots (numpy)."""
        return self._slots(self.topology.vaddr, self.nv)

    def _slots(self, addr, n):
        w = max([int(addr[i + 1] - addr[i]) for i in range(self.nb)] + [1])
        out = np.full((self.nb, w), n, np.int32)
        for i in range(self.nb):
            out[i, :addr[i + 1] - addr[i]] = np.arange(addr[i], addr[i + 1])
        return out

    def replace(self, **kw) -> "Model":
        """A copy with some parameters, the name or parts of the topology (``parent``,
        ``jtype``, ``body_names``, ``joint_names``, ``frame_names``, ``frame_body``) replaced."""
        topo = {k: kw.pop(k) for k in TOPOLOGY_FIELDS if k in kw}
        if topo:
            topo = {k: tuple(int(x) for x in np.asarray(v).reshape(-1)) if k in ("parent", "jtype", "frame_body")
                    else tuple(v) for k, v in topo.items()}
            kw["topology"] = dataclasses.replace(self.topology, **topo)
        return dataclasses.replace(self, **kw)

    def frame_id(self, name: str) -> int:
        """Index of a named frame (URDF link / joint name, DH frame, body name)."""
        if name in self.frame_names:
            return self.frame_names.index(name)
        raise KeyError(f"model {self.name!r} has no frame named {name!r}; "
                       f"frames: {list(self.frame_names)[:40]}{' ...' if len(self.frame_names) > 40 else ''}")

    def body_id(self, name: str) -> int:
        if name in self.body_names:
            return self.body_names.index(name)
        raise KeyError(f"model {self.name!r} has no body named {name!r}; bodies: {list(self.body_names)}")

    def __repr__(self):
        kinds = ",".join(J.JOINT_NAMES[t] for t in self.types)
        return f"Model({self.name!r}, nb={self.nb}, nq={self.nq}, nv={self.nv}, joints={{{kinds}}})"


jax.tree_util.register_dataclass(Model, data_fields=list(PARAM_FIELDS), meta_fields=["topology", "name"])


def build_model(*, parent, jtype, Xtree_E, Xtree_r, axis, mass, com, inertia, pitch=None,
                armature=None, damping=None, friction=None, q_lower=None, q_upper=None, effort_limit=None,
                velocity_limit=None, gravity=(0.0, 0.0, -9.81),
                body_names=None, joint_names=None, frames=None, name="model", triangle="raise",
                inertia_policy="raise") -> Model:
    """Validate numpy inputs and build a :class:`Model`.

    ``jtype`` entries are codes or names; ``frames`` is a list of (name, body, E, r).
    Raises :class:`ModelError` naming the offending body.  ``triangle="warn"`` downgrades a
    violated triangle inequality (I1 + I2 < I3, seen in real URDFs such as ANYmal C's camera
    links) to a warning.  ``inertia_policy`` ("raise" | "warn" | "repair" | "skip") decides what a
    non-physical inertia does (see :mod:`jaxdyn.model.validate`; "skip": already checked by
    the caller, e.g. per URDF link).  An empty tree (nb = 0) is a valid model with nq = nv = 0.
    """
    parent = np.asarray(parent, int).reshape(-1)
    nb = len(parent)
    body_names = tuple(body_names or [f"body{i}" for i in range(nb)])
    joint_names = tuple(joint_names or [f"joint{i}" for i in range(nb)])
    if len(body_names) != nb or len(joint_names) != nb:
        raise ModelError(f"{name}: {nb} bodies but {len(body_names)} body names / {len(joint_names)} joint names")
    jcodes = []
    for i, t in enumerate(list(jtype)):
        try:
            jcodes.append(J.joint_code(t))
        except ModelError as e:
            raise ModelError(f"{name}: body {i} ({body_names[i]!r}): {e}") from None
    if len(jcodes) != nb:
        raise ModelError(f"{name}: parent has {nb} entries but jtype has {len(jcodes)}")
    for i, p in enumerate(parent):
        if not (-1 <= p < i):
            raise ModelError(f"{name}: body {i} ({body_names[i]!r}) has parent {p}; "
                             "bodies must be in topological order with parent[i] < i (-1 = world)")

    def arr(x, shape, what):
        a = np.array(x, float)   # a writable copy (inertias may be repaired in place)
        if a.shape != shape:
            raise ModelError(f"{name}: {what} must have shape {shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            bad = np.argwhere(~np.isfinite(a))[0]
            raise ModelError(f"{name}: {what} has a non-finite entry at {tuple(bad)}")
        return a

    Xtree_E = arr(Xtree_E, (nb, 3, 3), "Xtree_E")
    Xtree_r = arr(Xtree_r, (nb, 3), "Xtree_r")
    axis = arr(axis, (nb, 3), "axis")
    mass = arr(mass, (nb,), "mass")
    com = arr(com, (nb, 3), "com")
    inertia = arr(inertia, (nb, 3, 3), "inertia")
    pitch = np.zeros(nb) if pitch is None else arr(pitch, (nb,), "pitch")
    for i in range(nb):
        where = f"{name}: body {i} ({body_names[i]!r})"
        if not np.allclose(Xtree_E[i] @ Xtree_E[i].T, np.eye(3), atol=1e-8):
            raise ModelError(f"{where}: Xtree rotation is not orthonormal")
        if jcodes[i] in (J.REVOLUTE, J.REVOLUTE_UB, J.PRISMATIC, J.HELICAL):
            n = np.linalg.norm(axis[i])
            if abs(n - 1.0) > 1e-6:
                raise ModelError(f"{where}: joint axis {axis[i].tolist()} has norm {n:.6g}; "
                                 "it must be a unit vector")
        else:
            axis[i] = (0.0, 0.0, 1.0)
        if mass[i] < 0:
            raise ModelError(f"{where}: negative mass {mass[i]}")
        if inertia_policy != "skip":
            inertia[i] = check_inertia(inertia[i], mass[i], where, inertia_policy, triangle)
    nq, nv = sum(J.NQ[t] for t in jcodes), sum(J.NV[t] for t in jcodes)
    lo = np.full(nq, -np.inf) if q_lower is None else np.asarray(q_lower, float).reshape(nq)
    hi = np.full(nq, np.inf) if q_upper is None else np.asarray(q_upper, float).reshape(nq)
    arm = np.zeros(nv) if armature is None else np.asarray(armature, float).reshape(nv)
    damp = np.zeros(nv) if damping is None else np.asarray(damping, float).reshape(nv)
    fric = np.zeros(nv) if friction is None else np.asarray(friction, float).reshape(nv)
    if not (np.all(arm >= 0) and np.all(damp >= 0) and np.all(fric >= 0)):
        raise ModelError(f"{name}: armature, damping and friction must be nonnegative, got armature {arm.tolist()}, "
                         f"damping {damp.tolist()}, friction {fric.tolist()}")
    lims = {}
    for what, x in (("effort_limit", effort_limit), ("velocity_limit", velocity_limit)):
        lims[what] = np.full(nv, np.inf) if x is None else np.asarray(x, float).reshape(nv)
        if np.any(np.isnan(lims[what])) or np.any(lims[what] <= 0):
            raise ModelError(f"{name}: {what} must be positive (+inf: none), got {lims[what].tolist()}")
    fnames, fbody, fE, fr = [], [], [], []
    for i in range(nb):  # every body is a frame under its own name
        fnames.append(body_names[i]); fbody.append(i); fE.append(np.eye(3)); fr.append(np.zeros(3))
    first = {nm: i for i, nm in enumerate(fnames)}          # name -> first frame (linear time)
    for (fname, b, E, r) in list(frames or []):
        j = first.get(fname)
        if j is not None and fbody[j] == b and np.allclose(fr[j], r) and np.allclose(fE[j], E):
            continue
        first.setdefault(fname, len(fnames))
        fnames.append(fname); fbody.append(int(b)); fE.append(np.asarray(E, float)); fr.append(np.asarray(r, float))
    topo = Topology(tuple(int(p) for p in parent), tuple(jcodes), body_names, joint_names, tuple(fnames),
                    tuple(fbody))
    f = jax.device_put      # numpy -> device without compiling a conversion per shape (jnp.asarray does)
    return Model(Xtree_E=f(Xtree_E), Xtree_r=f(Xtree_r), axis=f(axis), pitch=f(pitch), mass=f(mass), com=f(com),
                 inertia=f(inertia), armature=f(arm), damping=f(damp), friction=f(fric), q_lower=f(lo), q_upper=f(hi),
                 effort_limit=f(lims["effort_limit"]), velocity_limit=f(lims["velocity_limit"]),
                 frame_E=f(np.asarray(fE).reshape(-1, 3, 3)), frame_r=f(np.asarray(fr).reshape(-1, 3)),
                 gravity=f(np.asarray(gravity, float)), topology=topo, name=name)


def check_state(model: Model, **arrays):
    """Raise ShapeError unless each named array has shape (model.nq,) (``q``, ``q0``) or
    (model.nv,) (everything else) and a floating dtype, and unless the model's parameters
    are one robot's (a Model with a parameter per lane runs under ``jax.vmap`` over that
    axis).  Batch with ``jax.vmap``."""
    if jnp.shape(model.mass) != (model.nb,):
        raise ShapeError(f"model {model.name!r} has parameters with a leading lane axis (mass {jnp.shape(model.mass)}, "
                         f"nb={model.nb}): run it under jax.vmap over its lanes")
    for nm, a in arrays.items():
        n = model.nq if nm in ("q", "q0") else model.nv
        if a is None or isinstance(a, (list, tuple, str, dict)):
            raise ShapeError(f"{nm} must be an array of shape ({n},) for model {model.name!r}, "
                             f"got {type(a).__name__}; pass jnp.asarray(...)")
        shp = jnp.shape(a)
        if shp != (n,):
            raise ShapeError(f"{nm} must have shape ({n},) for model {model.name!r} "
                             f"(nq={model.nq}, nv={model.nv}), got {shp}; batch with jax.vmap")
        dt = jnp.result_type(a)
        if not jnp.issubdtype(dt, jnp.floating):
            raise ShapeError(f"{nm} must be a floating-point array, got dtype {dt}")


def state_dtype(*xs):
    """The floating dtype of a computation on states ``xs`` (None entries skipped)."""
    return jnp.result_type(*[x for x in xs if x is not None])


def cast(model: Model, dtype) -> Model:
    """The model with its parameters in ``dtype`` (the states' dtype: a float32 state runs in
    float32 against a float64 model)."""
    return jax.tree_util.tree_map(lambda a: a.astype(dtype) if a.dtype != dtype else a, model)



def stack_parameters(models) -> Model:
    """Models of one structure (parents, joint types and frame bodies equal) as one Model with
    a leading axis on every parameter, for ``jax.vmap`` (the first model's names).  Robots of
    different structure: :func:`jaxdyn.stack`."""
    models = list(models)
    t0 = models[0].topology
    for i, m in enumerate(models):
        t = m.topology
        if (t.parent, t.jtype, t.frame_body) != (t0.parent, t0.jtype, t0.frame_body):
            raise ModelError(f"stack_parameters: model {i} ({m.name!r}) does not have the structure of model 0 "
                             f"({models[0].name!r})")
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *[m.replace(topology=t0, name=models[0].name) for m in models])
