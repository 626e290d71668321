"""The Model pytree: physical parameters as array leaves, topology as integer arrays.

Bodies are numbered 0..nb-1 in topological order (``parent[i] < i``; ``-1`` is the world).
Body i is moved by joint i.  Its frame is the joint's child frame; ``Xtree[i]`` is the Plücker
transform from the parent body frame to the joint's parent-side frame (Featherstone's
``Xtree``), so ``Xup[i] = XJ[i] Xtree[i]``.

Array leaves (``jax.grad`` w.r.t. a Model gives parameter gradients):

======== ============== ===========================================================
field    shape          meaning
======== ============== ===========================================================
parent   (nb,) int32    parent body, -1 = world
jtype    (nb,) int32    joint code (see :mod:`jaxdyn.model.joints`)
qidx     (nb, nqj) i32  q index of each joint coordinate; ``nq`` marks an unused slot
vidx     (nb, k) int32  v index of each joint dof; ``nv`` marks an unused slot
Xtree_E  (nb, 3, 3)     rotation part of Xtree
Xtree_r  (nb, 3)        translation part of Xtree (joint origin in parent frame)
axis     (nb, 3)        unit joint axis in the joint frame
pitch    (nb,)          helical pitch (m / rad)
mass     (nb,)          link mass
com      (nb, 3)        center of mass in the body frame
inertia  (nb, 3, 3)     rotational inertia about the COM, body-frame axes
armature (nv,)          rotor inertia added to the diagonal of M (1 on padded dofs)
damping  (nv,)          viscous joint damping (used by ``forward_dynamics`` and rollouts)
v_pad    (nv,)          1.0 on dofs added by :func:`stack` padding, else 0
q_lower  (nq,)          lower position limits (-inf if none)
q_upper  (nq,)          upper position limits (+inf if none)
frame_body (nf,) int32  body a named frame is attached to (-1 = world)
frame_E, frame_r        Plücker transform body -> frame
gravity  (3,)           gravity in world coordinates
======== ============== ===========================================================

Static metadata: sizes, the tuple of joint types present (only those branches are compiled),
names of bodies, joints and frames, ``scan_layout`` (the batch-last kernels' plan for a
floating root), ``static_tree`` (parent and vidx as tuples) and, for a stack,
``lane_parents`` (each body's parents among the members) and ``lane_dofs`` (each dof's joint
slots among the members), see ``jaxdyn.stack``.

Topology as data, not as static structure (a decision taken by measurement, 2026-11).  The
alternative is a Model split into a static topology (parent, joint types, index maps as
hashable tuples) and a pytree of float parameters.  It would let ``jax.grad`` take the Model
without ``allow_int=True`` and let the sweeps unroll over known parents.  Measured on the
2-core CPU (jax 0.10.2, f64), a static parent list with Python-unrolled sweeps instead of
``lax.scan``:

* single-call latency got worse, not better: panda ``aba`` 157 -> 219 µs, ``rnea`` 134 ->
  134 µs; talos_reduced ``aba`` 540 -> 1179 µs (XLA:CPU pays per emitted kernel, and unrolling
  multiplies them);
* compile time grew with the tree: talos_reduced ``aba`` 1.4 -> 10.6 s;
* every robot would be its own program, while with traced topology two trees of the same sizes
  and joint-type set share one compiled program, and ``jaxdyn.stack`` batches robots of
  different structure under one ``vmap``, which needs the topology to be an array.

So the topology stays integer array leaves.  What must be static is static: sizes, the
joint-type set, and ``scan_layout``, which ``build_model`` computes from the concrete topology
and ``replace``/``stack`` drop when the topology changes.  Optimizers take the float leaves
through :func:`jaxdyn.parameters` / :func:`jaxdyn.with_parameters` (a dict of the physical
parameters) or ``jax.grad(..., allow_int=True)`` on the whole Model.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from ..compiled import pack_at_top_level
from ..errors import ModelError, ShapeError
from . import joints as J
from .validate import check_inertia

DATA_FIELDS = ("parent", "jtype", "qidx", "vidx", "Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com",
               "inertia", "armature", "damping", "v_pad", "q_lower", "q_upper", "frame_body", "frame_E",
               "frame_r", "gravity")
"""Array leaves of a Model (traced under jit, batched by ``stack``)."""
META_FIELDS = ("nb", "nq", "nv", "nqj", "k", "types", "body_names", "joint_names", "frame_names", "name",
               "scan_layout", "static_tree", "lane_parents", "lane_dofs")
"""Static metadata of a Model (part of the jit cache key)."""


@no_type_check  # a pytree node: JAX rebuilds it with arbitrary leaves (tracers, None,
# sentinels) inside transformations, so the field annotations document, they are not checked
@dataclasses.dataclass(frozen=True)
class Model:
    """A kinematic tree as a pytree: per-body arrays (leading axis nb, topological order;
    joint placements Xtree as (E, r) in the parent body frame, COM and inertia in the body
    frame) are data; sizes, joint-type set and names are static.  Build with
    :func:`build_model`, :func:`jaxdyn.load_urdf` or :func:`jaxdyn.from_dh`."""
    parent: jax.Array
    jtype: jax.Array
    qidx: jax.Array
    vidx: jax.Array
    Xtree_E: jax.Array
    Xtree_r: jax.Array
    axis: jax.Array
    pitch: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    armature: jax.Array
    damping: jax.Array
    v_pad: jax.Array
    q_lower: jax.Array
    q_upper: jax.Array
    frame_body: jax.Array
    frame_E: jax.Array
    frame_r: jax.Array
    gravity: jax.Array
    nb: int
    nq: int
    nv: int
    nqj: int
    k: int
    types: tuple[int, ...]
    body_names: tuple[str, ...] = ()
    joint_names: tuple[str, ...] = ()
    frame_names: tuple[str, ...] = ()
    name: str = "model"
    scan_layout: Optional[tuple] = None
    static_tree: Optional[tuple] = None
    lane_parents: Optional[tuple] = None
    lane_dofs: Optional[tuple] = None

    def replace(self, **kw) -> "Model":
        """A copy with some fields replaced.  Replacing the topology (parent, jtype, nb, k,
        types) drops ``scan_layout``, replacing parent, vidx, nb, nv or k drops
        ``static_tree``, replacing parent or nb drops ``lane_parents``, and replacing vidx,
        nb, nv or k drops ``lane_dofs``, unless they are given too."""
        if "scan_layout" not in kw and any(f in kw for f in ("parent", "jtype", "nb", "k", "types")):
            kw["scan_layout"] = None
        if "static_tree" not in kw and any(f in kw for f in ("parent", "vidx", "nb", "nv", "k")):
            kw["static_tree"] = None
        if "lane_parents" not in kw and any(f in kw for f in ("parent", "nb")):
            kw["lane_parents"] = None
        if "lane_dofs" not in kw and any(f in kw for f in ("vidx", "nb", "nv", "k")):
            kw["lane_dofs"] = None
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


def lone_root(parent, nb: int) -> bool:
    """Whether body 0 is the only root of a concrete parent array (nb,) of nb > 1 bodies: the
    condition for taking it out of the batch-last kernels' scan."""
    parent = np.asarray(parent)
    return bool(nb > 1 and parent[0] == -1 and np.all(parent[1:] >= 0))


def floating_root_layout(parent, jtype, nb: int):
    """Static plan of the batch-last kernels (:func:`jaxdyn.aba_batch`) from concrete
    topology: ``(True, k, types)`` when body 0 is the only root and has a FREE joint (it is
    then handled outside the scan, whose bodies need only ``k`` dof slots of joint ``types``),
    else None.  Stored as ``Model.scan_layout`` so traced models (under an outer jit) keep it."""
    parent, jtype = np.asarray(parent), np.asarray(jtype)
    if not (lone_root(parent, nb) and jtype[0] == J.FREE):
        return None
    rest = sorted({int(t) for t in jtype[1:]})
    return True, max([J.NV[t] for t in rest] + [1]), tuple(rest)


def tree_arrays(model: Model):
    """(parent (nb,), vidx (nb, k)) as numpy arrays when the topology is known while tracing
    (a concrete model, or ``model.static_tree``, which ``build_model`` sets so that a Model
    passed to a jitted function keeps it), else the model's (traced) arrays.  Functions of
    the topology alone (ancestry matrices, dof owners) computed from numpy arrays (with
    :func:`array_module`) become constants of the compiled program instead of work done at
    every call.  ``jaxdyn.stack`` drops it: a stack's topology is per robot."""
    if model.static_tree is not None:
        parent, vidx = model.static_tree
        return np.asarray(parent, np.int32).reshape(model.nb), np.asarray(vidx, np.int32).reshape(model.nb, model.k)
    try:
        return np.asarray(model.parent), np.asarray(model.vidx)
    except jax.errors.TracerArrayConversionError:
        return model.parent, model.vidx


def array_module(x):
    """numpy for a numpy array, else jax.numpy: functions of the topology are written once
    for both (:func:`tree_arrays`)."""
    return np if isinstance(x, np.ndarray) else jnp


jax.tree_util.register_dataclass(Model, data_fields=list(DATA_FIELDS), meta_fields=list(META_FIELDS))
pack_at_top_level(Model)    # one buffer per dtype at a top-level jaxdyn call (jaxdyn.packing)


def build_model(*, parent, jtype, Xtree_E, Xtree_r, axis, mass, com, inertia, pitch=None,
                armature=None, damping=None, q_lower=None, q_upper=None, gravity=(0.0, 0.0, -9.81),
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
    nqs = [J.NQ[t] for t in jcodes]
    nvs = [J.NV[t] for t in jcodes]
    nq, nv = int(sum(nqs)), int(sum(nvs))
    nqj, k = max(max(nqs, default=0), 1), max(max(nvs, default=0), 1)
    qidx = np.full((nb, nqj), nq, np.int32)
    vidx = np.full((nb, k), nv, np.int32)
    qa = va = 0
    for i in range(nb):
        qidx[i, :nqs[i]] = np.arange(qa, qa + nqs[i])
        vidx[i, :nvs[i]] = np.arange(va, va + nvs[i])
        qa += nqs[i]
        va += nvs[i]
    lo = np.full(nq, -np.inf) if q_lower is None else np.asarray(q_lower, float).reshape(nq)
    hi = np.full(nq, np.inf) if q_upper is None else np.asarray(q_upper, float).reshape(nq)
    arm = np.zeros(nv) if armature is None else np.asarray(armature, float).reshape(nv)
    damp = np.zeros(nv) if damping is None else np.asarray(damping, float).reshape(nv)
    if np.any(arm < 0) or np.any(damp < 0):
        raise ModelError(f"{name}: armature and damping must be nonnegative")
    frames = list(frames or [])
    fnames, fbody, fE, fr = [], [], [], []
    for i in range(nb):  # every body is a frame under its own name
        fnames.append(body_names[i]); fbody.append(i); fE.append(np.eye(3)); fr.append(np.zeros(3))
    first = {nm: i for i, nm in enumerate(fnames)}          # name -> first frame (linear time)
    for (fname, b, E, r) in frames:
        j = first.get(fname)
        if j is not None and fbody[j] == b and np.allclose(fr[j], r) and np.allclose(fE[j], E):
            continue
        first.setdefault(fname, len(fnames))
        fnames.append(fname); fbody.append(int(b)); fE.append(np.asarray(E, float)); fr.append(np.asarray(r, float))
    f = jax.device_put      # numpy -> device without compiling a conversion per shape (jnp.asarray does)
    return Model(
        parent=f(parent.astype(np.int32)), jtype=f(np.asarray(jcodes, np.int32)), qidx=f(qidx),
        vidx=f(vidx), Xtree_E=f(Xtree_E), Xtree_r=f(Xtree_r), axis=f(axis), pitch=f(pitch),
        mass=f(mass), com=f(com), inertia=f(inertia), armature=f(arm), damping=f(damp),
        v_pad=f(np.zeros(nv)), q_lower=f(lo), q_upper=f(hi),
        frame_body=f(np.asarray(fbody, np.int32)), frame_E=f(np.asarray(fE).reshape(-1, 3, 3)),
        frame_r=f(np.asarray(fr).reshape(-1, 3)), gravity=f(np.asarray(gravity, float)),
        nb=nb, nq=nq, nv=nv, nqj=nqj, k=k, types=tuple(sorted(set(jcodes))) or (J.FIXED,),
        body_names=body_names, joint_names=joint_names, frame_names=tuple(fnames), name=name,
        scan_layout=floating_root_layout(parent, jcodes, nb),
        static_tree=(tuple(int(p) for p in parent), tuple(int(x) for x in vidx.reshape(-1))))


def check_state(model: Model, **arrays):
    """Raise ShapeError unless each named array has trailing shape (model.nq,) / (model.nv,).

    Pass e.g. ``q=q, qd=qd``; ``q`` must have nq entries, everything else nv.
    Leading batch dimensions are not allowed (use ``jax.vmap``).
    """
    for nm, a in arrays.items():
        if a is None or isinstance(a, (list, tuple, str, dict)):
            raise ShapeError(f"{nm} must be an array of shape ({model.nq if nm in ('q', 'q0') else model.nv},) "
                             f"for model {model.name!r}, got {type(a).__name__}; pass jnp.asarray(...)")
        n = model.nq if nm in ("q", "q0") else model.nv
        shp = jnp.shape(a)
        if shp != (n,):
            raise ShapeError(f"{nm} must have shape ({n},) for model {model.name!r} "
                             f"(nq={model.nq}, nv={model.nv}), got {shp}; batch with jax.vmap")
        dt = jnp.result_type(a)
        if not jnp.issubdtype(dt, jnp.floating):
            raise ShapeError(f"{nm} must be a floating-point array, got dtype {dt}")
