"""Robots by name, as configs and the command line spell them."""
from __future__ import annotations

import os

import numpy as np

from ..errors import ConfigError

BUILTIN = ("puma560", "stanford_arm", "planar3", "double_pendulum")
ERD_URDFS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "xarm7": "xarm_description/urdf/xarm7.urdf",
}
"""Short names for URDFs of the example-robot-data package ("erd:panda")."""


def example_robot_data_dir():
    """The ``robots`` folder of an installed example-robot-data (pip), or None."""
    import os
    import sys
    for p in sys.path:
        d = os.path.join(p, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(d):
            return d
    return None


def _erd(name, key="robot.name"):
    import os
    d = example_robot_data_dir()
    if d is None:
        raise ConfigError(f"{key} 'erd:{name}' needs the example-robot-data package "
                          "(pip install example-robot-data)")
    rel = ERD_URDFS.get(name, name)
    if not rel.endswith(".urdf"):
        raise ConfigError(f"{key} 'erd:{name}': unknown short name; use one of {sorted(ERD_URDFS)} or a "
                          "path ending in .urdf under example-robot-data/robots")
    return os.path.join(d, rel)


def robot_by_name(name, key="robot.name"):
    """A built-in robot ("puma560", "stanford_arm", "planar3", "double_pendulum"), a closed
    mechanism of :data:`jaxdyn.mechanisms.MECHANISMS` (returned as (ClosedModel, q0)), or
    "urdf:PATH", "mjcf:PATH" (:func:`jaxdyn.load_mjcf`: a Model, or (ClosedModel, q0) for a file
    with active connect / weld equalities, q0 MuJoCo's ``qpos0``, the pose the file describes,
    not projected onto the constraints), or "erd:NAME" (a URDF of the example-robot-data package: a short name of
    :data:`ERD_URDFS` or a path under its ``robots`` folder).  Unknown names raise
    :class:`ConfigError` listing the known ones, naming the name as ``key`` (where the user
    gave it: "robot.name", "--robot")."""
    from . import robots, mechanisms
    from .urdf import load_urdf
    if name.startswith("urdf:"):
        return load_urdf(name[5:])
    if name.startswith("mjcf:"):
        from ..constraints.model import ClosedModel
        from .mjcf import load_mjcf
        built = load_mjcf(name[5:])
        if not isinstance(built, ClosedModel):
            return built
        return built, start_configuration(name, built.model)    # the pose its equalities were written at
    if name.startswith("erd:"):
        return load_urdf(_erd(name[4:], key))
    if name in mechanisms.MECHANISMS:
        return mechanisms.MECHANISMS[name]()
    if name not in BUILTIN:
        raise ConfigError(f"{key} {name!r} unknown; use one of "
                          f"{sorted(BUILTIN) + sorted(mechanisms.MECHANISMS)}, urdf:PATH, mjcf:PATH or erd:NAME")
    return getattr(robots, name)()


def start_configuration(name, model):
    """The configuration (nq,) the tools start robot ``name`` from when a config gives none:
    for "mjcf:PATH" MuJoCo's ``qpos0``, the pose the file describes (hinge and slide ``ref``,
    free bodies where the XML puts them; what ``mj_resetData`` sets), else
    :func:`jaxdyn.neutral`.  ``model``: the loaded tree (``ClosedModel.model``)."""
    if name.startswith("mjcf:"):
        from .mjcf import compile_mjcf, from_mujoco
        return np.asarray(from_mujoco(model, compile_mjcf(name[5:])[0].qpos0)[0])
    from ..model.configuration import neutral
    return np.asarray(neutral(model))


def absolute_name(name):
    """The robot name with the path of "urdf:PATH" or "mjcf:PATH" made absolute (other names
    as they are): a name that still finds the robot from another working folder, as the run
    summaries record it for ``jaxdyn view``."""
    if name.startswith(("urdf:", "mjcf:")):
        return name[:5] + os.path.abspath(name[5:])
    return name


def model_file(name):
    """The URDF or MJCF file behind a robot name ("urdf:PATH", "erd:NAME", "mjcf:PATH"), or
    None for other robots (built-in, mechanisms): the viewer draws that file's meshes."""
    if name.startswith(("urdf:", "mjcf:")):
        return name[5:]
    if name.startswith("erd:"):
        return _erd(name[4:])
    return None
