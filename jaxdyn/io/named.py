"""Robots by name, as configs and the command line spell them."""
from __future__ import annotations

from ..errors import ConfigError

BUILTIN = ("puma560", "stanford_arm", "planar3", "double_pendulum")


def robot_by_name(name):
    """A built-in robot ("puma560", "stanford_arm", "planar3", "double_pendulum"), a closed
    mechanism of :data:`jaxdyn.mechanisms.MECHANISMS` (returned as (ClosedModel, q0)), or
    "urdf:PATH".  Unknown names raise :class:`ConfigError` listing the known ones."""
    from . import robots, mechanisms
    from .urdf import load_urdf
    if name.startswith("urdf:"):
        return load_urdf(name[5:])
    if name in mechanisms.MECHANISMS:
        return mechanisms.MECHANISMS[name]()
    if name not in BUILTIN:
        raise ConfigError(f"robot.name {name!r} unknown; use one of "
                          f"{sorted(BUILTIN) + sorted(mechanisms.MECHANISMS)} or urdf:PATH")
    return getattr(robots, name)()
