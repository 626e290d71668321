"""Built-in closed mechanisms: each builder returns (ClosedModel, q0) with q0 on the constraint
manifold (projected by :func:`jaxdyn.project_constraints`)."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..model.model import build_model


def _rod(L, m):
    """Slender rod of length L and mass m along x: COM (L/2, 0, 0), inertia about the COM."""
    return np.array([L / 2, 0.0, 0.0]), np.diag([1e-4 * m, m * L * L / 12, m * L * L / 12])


def four_bar(ground=2.0, crank=1.0, coupler=2.0, rocker=1.5, masses=(1.0, 2.0, 1.5)):
    """Planar four-bar in the x-y plane under gravity -y: crank, coupler and rocker as a chain of
    revolute joints about z from the origin, the rocker tip pinned to the world at (ground, 0, 0)
    by a 3-row point constraint (the z row is redundant: rank 2, 1 dof)."""
    from ..constraints import Constraint, check_assembled, close_loops, project_constraints
    L = [crank, coupler, rocker]
    rods = [_rod(l, mm) for l, mm in zip(L, masses)]
    m = build_model(parent=[-1, 0, 1], jtype=["revolute"] * 3, Xtree_E=np.tile(np.eye(3), (3, 1, 1)),
                    Xtree_r=np.array([[0, 0, 0], [L[0], 0, 0], [L[1], 0, 0]]), axis=np.tile([0, 0, 1.0], (3, 1)),
                    mass=list(masses), com=np.stack([r[0] for r in rods]), inertia=np.stack([r[1] for r in rods]),
                    gravity=(0.0, -9.81, 0.0), body_names=["crank", "coupler", "rocker"],
                    frames=[("tip", 2, np.eye(3), np.array([L[2], 0, 0]))], name="four_bar")
    cm = close_loops(m, [Constraint("point", "tip", None, placement_b=(np.eye(3), np.array([ground, 0.0, 0.0])),
                                    name="pin")])
    q, _ = project_constraints(cm, np.array([np.pi / 3, -np.pi / 3, -np.pi / 2]), np.zeros(3))
    return cm, np.asarray(check_assembled(cm, q, "mechanisms.four_bar"))


def five_bar(base=1.0, proximal=1.0, distal=1.2, masses=(1.0, 0.8, 1.0, 0.8)):
    """Planar five-bar parallel mechanism (2 dof): two proximal-distal chains from ground pivots
    at (-base/2, 0, 0) and (base/2, 0, 0), their distal tips pinned together."""
    from ..constraints import Constraint, check_assembled, close_loops, project_constraints
    rods = [_rod(l, mm) for l, mm in zip((proximal, distal, proximal, distal), masses)]
    E = np.tile(np.eye(3), (4, 1, 1))
    m = build_model(parent=[-1, 0, -1, 2], jtype=["revolute"] * 4, Xtree_E=E,
                    Xtree_r=np.array([[-base / 2, 0, 0], [proximal, 0, 0], [base / 2, 0, 0], [proximal, 0, 0]]),
                    axis=np.tile([0, 0, 1.0], (4, 1)), mass=list(masses), com=np.stack([r[0] for r in rods]),
                    inertia=np.stack([r[1] for r in rods]), gravity=(0.0, -9.81, 0.0),
                    body_names=["left_proximal", "left_distal", "right_proximal", "right_distal"],
                    frames=[("left_tip", 1, np.eye(3), np.array([distal, 0, 0])),
                            ("right_tip", 3, np.eye(3), np.array([distal, 0, 0]))], name="five_bar")
    cm = close_loops(m, [Constraint("point", "left_tip", "right_tip", name="pin")])
    q, _ = project_constraints(cm, np.array([2.0, -1.2, 1.1, 1.2]), np.zeros(4))
    return cm, np.asarray(check_assembled(cm, q, "mechanisms.five_bar"))


def quadruped(body=(0.6, 0.3, 0.1), body_mass=10.0, thigh=0.3, shank=0.3, leg_mass=(1.0, 0.5), height=0.45,
              form="closed"):
    """A quadruped (floating box body, four legs of hip-abduction x, hip-flexion y and knee y
    joints) standing with its four point feet held on the ground (Lilly and Orin's Type 1):
    18 dof, 12 constraint rows.  Feet are pinned where they are at the initial stance.
    ``form="closed"``: a ClosedModel (schur, kkt); ``"legged"``: the same mechanism as a
    :class:`~jaxdyn.LeggedSystem` (lilly_orin, rccfd; same state layout).  Returns (system, q0)."""
    from ..constraints import Constraint, check_assembled, close_loops, project_constraints
    from ..model import joints as J
    bx, by, bz = body
    Ib = body_mass / 12 * np.diag([by * by + bz * bz, bx * bx + bz * bz, bx * bx + by * by])
    parent, jt, Er, r, ax, mass, com, I, names, frames = [-1], [J.FREE], [np.eye(3)], [np.zeros(3)], \
        [np.array([0, 0, 1.0])], [body_mass], [np.zeros(3)], [Ib], ["trunk"], []
    for k, (sx, sy, leg) in enumerate([(1, 1, "LF"), (1, -1, "RF"), (-1, 1, "LH"), (-1, -1, "RH")]):
        hip = np.array([sx * bx / 2, sy * by / 2, 0.0])
        small = lambda mm: mm * 1e-3 * np.eye(3)
        c_t, I_t = np.array([0, 0, -thigh / 2]), np.diag([leg_mass[0] * thigh ** 2 / 12] * 2 + [1e-4])
        c_s, I_s = np.array([0, 0, -shank / 2]), np.diag([leg_mass[1] * shank ** 2 / 12] * 2 + [1e-4])
        b0 = len(parent)
        parent += [0, b0, b0 + 1]
        jt += [J.REVOLUTE] * 3
        Er += [np.eye(3)] * 3
        r += [hip, np.zeros(3), np.array([0, 0, -thigh])]
        ax += [np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), np.array([0, 1.0, 0])]
        mass += [0.2, leg_mass[0], leg_mass[1]]
        com += [np.zeros(3), c_t, c_s]
        I += [small(0.2), I_t, I_s]
        names += [f"{leg}_hip", f"{leg}_thigh", f"{leg}_shank"]
        frames.append((f"{leg}_foot", b0 + 2, np.eye(3), np.array([0, 0, -shank])))
    m = build_model(parent=parent, jtype=jt, Xtree_E=np.stack(Er), Xtree_r=np.stack(r), axis=np.stack(ax),
                    mass=mass, com=np.stack(com), inertia=np.stack(I), body_names=names, frames=frames,
                    name="quadruped")
    q0 = np.zeros(m.nq)
    q0[2], q0[6] = height, 1.0                                  # base height, unit quaternion (xyzw)
    for k in range(4):
        q0[7 + 3 * k: 10 + 3 * k] = [0.0, 0.6, -1.2]            # knees bent
    import jax.numpy as jnp
    from ..kinematics import frame_pose
    feet = []
    for leg in ("LF", "RF", "LH", "RH"):
        p = np.asarray(frame_pose(m, jnp.asarray(q0), f"{leg}_foot")[1]).copy()
        p[2] = 0.0                                              # on the ground
        feet.append(Constraint("point", f"{leg}_foot", None, placement_b=(np.eye(3), p), name=f"{leg}_foot"))
    cm = close_loops(m, feet)
    q, _ = project_constraints(cm, q0, np.zeros(m.nv))
    q = np.asarray(check_assembled(cm, q, "mechanisms.quadruped"))
    if form == "legged":
        from ..constraints import legged_system
        return legged_system(m, q, [f"{leg}_foot" for leg in ("LF", "RF", "LH", "RH")]), q
    if form != "closed":
        raise ArgumentError(f"quadruped: form must be 'closed' or 'legged', got {form!r}")
    return cm, q


MECHANISMS = {"four_bar": four_bar, "five_bar": five_bar, "quadruped": quadruped}


def arms_holding_box(n_arms=3, radius=0.9, box=(0.3, 0.3, 0.3), box_mass=2.0, arm_q=(0.0, -0.6, 0.4, 0.0, 0.5, 0.0),
                     form="closed", contacts="weld"):
    """ell PUMA 560 arms (Saha's Table II) on a circle of ``radius`` around a floating box, each
    end effector welded to the box where it is at the initial pose (Rodriguez and Kreutz's arms
    rigidly grasping a common object; Lilly and Orin's Type 0).  Bodies: the box (free flyer),
    then the arms; 6 + 6 ell dof, 6 ell constraint rows (rank 6 ell for ell >= 1 at generic poses).

    ``form="closed"``: a :class:`~jaxdyn.ClosedModel` (solvers "schur", "kkt");
    ``form="grasp"``: the same system as a :class:`~jaxdyn.GraspSystem` (solver "rccfd"), with the
    same state layout.  ``contacts``: one grasp contact kind for all or one per arm
    (``jaxdyn.constraints.grasp.CONTACTS``): "weld", "revolute" (hinge about the grasp frame's z
    axis: a 5-row "revolute" constraint with frame A on the box), "soft_finger" (4 rows: the
    contact point and the rotation about the normal z, a "subspace" constraint) or
    "point" (a 3-row "point" constraint).  The grasp frame is the end effector's frame at
    the initial pose ``arm_q`` (6,) for every arm or (n_arms, 6), one row per arm.  Returns
    (system, q0).
    """
    import jax.numpy as jnp

    from ..constraints import Constraint, close_loops
    from ..kinematics import frame_pose
    from ..model import joints as J
    from .robots import puma560
    arm = puma560()
    nb_a = arm.nb
    bx, by, bz = box
    Ib = box_mass / 12 * np.diag([by * by + bz * bz, bx * bx + bz * bz, bx * bx + by * by])
    parent, jt, E, r, ax, mass, com, I, names, frames = [-1], [J.FREE], [np.eye(3)], [np.zeros(3)], \
        [np.array([0, 0, 1.0])], [box_mass], [np.zeros(3)], [Ib], ["box"], []
    A = {f: np.asarray(getattr(arm, f)) for f in ("parent", "Xtree_E", "Xtree_r", "axis", "mass", "com", "inertia",
                                                  "frame_E", "frame_r", "frame_body")}
    ee = arm.frame_names.index("ee")
    for i in range(n_arms):
        th = 2 * np.pi * i / n_arms
        Rz = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1.0]])
        base = Rz @ np.array([radius, 0.0, 0.0])
        Rb = Rz @ np.array([[-1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]])     # facing the centre
        off = len(parent)
        for b in range(nb_a):
            p = int(A["parent"][b])
            parent.append(-1 if p < 0 else p + off)
            if p < 0:   # place the arm's base: Xtree = (E, r) from the world
                Ew = A["Xtree_E"][b] @ Rb.T
                E.append(Ew); r.append(base + Rb @ A["Xtree_r"][b])
            else:
                E.append(A["Xtree_E"][b]); r.append(A["Xtree_r"][b])
            jt.append(J.REVOLUTE); ax.append(A["axis"][b]); mass.append(A["mass"][b]); com.append(A["com"][b])
            I.append(A["inertia"][b]); names.append(f"arm{i}_{arm.body_names[b]}")
        frames.append((f"arm{i}_ee", off + int(A["frame_body"][ee]), A["frame_E"][ee], A["frame_r"][ee]))
    m = build_model(parent=parent, jtype=jt, Xtree_E=np.stack(E), Xtree_r=np.stack(r), axis=np.stack(ax),
                    mass=mass, com=np.stack(com), inertia=np.stack(I), body_names=names, frames=frames,
                    name=f"{n_arms}_arms_box")
    q = np.zeros(m.nq)
    q[6] = 1.0
    arm_q = np.asarray(arm_q, float)
    if arm_q.shape not in ((6,), (n_arms, 6)):
        raise ArgumentError(f"arms_holding_box: arm_q must have shape (6,) or ({n_arms}, 6), got {arm_q.shape}")
    for i in range(n_arms):
        q[7 + 6 * i: 13 + 6 * i] = arm_q if arm_q.ndim == 1 else arm_q[i]
    pees = [np.asarray(frame_pose(m, jnp.asarray(q), f"arm{i}_ee")[1]) for i in range(n_arms)]
    q[:3] = np.mean(pees, 0)                                   # the box between the hands
    kinds = (contacts,) * n_arms if isinstance(contacts, str) else tuple(contacts)
    welds, closures = [], []
    soft = np.eye(6)[:, [0, 1, 2, 5]]          # the contact point and the rotation about the normal z
    for i in range(n_arms):
        Ra, pa = (np.asarray(x) for x in frame_pose(m, jnp.asarray(q), f"arm{i}_ee"))
        Rb_, pb = (np.asarray(x) for x in frame_pose(m, jnp.asarray(q), "box"))
        pl = (Rb_.T @ Ra, Rb_.T @ (pa - pb))
        welds.append(Constraint("weld", f"arm{i}_ee", "box", placement_b=pl, name=f"grasp{i}"))
        k = kinds[i] if i < len(kinds) else None
        closures.append({"weld": welds[-1],
                         "revolute": Constraint("revolute", "box", f"arm{i}_ee", placement_a=pl, name=f"grasp{i}"),
                         "soft_finger": Constraint("subspace", "box", f"arm{i}_ee", placement_a=pl, subspace=soft,
                                                   name=f"grasp{i}"),
                         "point": Constraint("point", f"arm{i}_ee", "box", placement_b=pl, name=f"grasp{i}"),
                         }.get(k))
        if closures[-1] is None:
            raise ArgumentError(f"arms_holding_box: contacts must be one kind or {n_arms} kinds of "
                             f"('weld', 'revolute', 'soft_finger', 'point'), got {contacts!r}")
    if len(kinds) != n_arms:
        raise ArgumentError(f"arms_holding_box: {n_arms} arms but {len(kinds)} contact kinds")
    if form == "closed":
        return close_loops(m, closures), q
    if form != "grasp":
        raise ArgumentError(f"arms_holding_box: form must be 'closed' or 'grasp', got {form!r}")
    from ..constraints import grasp_system
    obj = build_model(parent=[-1], jtype=[J.FREE], Xtree_E=np.eye(3)[None], Xtree_r=np.zeros((1, 3)),
                      axis=np.array([[0, 0, 1.0]]), mass=[box_mass], com=np.zeros((1, 3)), inertia=Ib[None],
                      body_names=["box"], name="box",
                      frames=[(f"grasp{i}", 0, np.asarray(w.placement_b[0]).T, np.asarray(w.placement_b[1]))
                              for i, w in enumerate(welds)])
    arms = []
    for i in range(n_arms):
        off = 1 + i * nb_a
        arms.append(arm.replace(Xtree_E=jnp.asarray(np.stack(E[off:off + nb_a])),
                                Xtree_r=jnp.asarray(np.stack(r[off:off + nb_a])), name=f"arm{i}"))
    return grasp_system(obj, arms, "ee", [f"grasp{i}" for i in range(n_arms)], contacts=kinds), q


MECHANISMS["three_arms_box"] = arms_holding_box
STRUCTURED = {"quadruped": lambda: quadruped(form="legged"), "three_arms_box": lambda: arms_holding_box(form="grasp")}
"""Mechanisms with a Lilly-Orin / Rodriguez-Kreutz structure (chains on one reference member), in
the form that methods "lilly_orin" and "rccfd" take (same state layout as the closed form)."""
