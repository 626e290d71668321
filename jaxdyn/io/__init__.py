"""Model builders: standard DH tables, URDF, built-in robots."""
from .dh import from_dh
from .urdf import load_urdf, parse_urdf
from . import robots

__all__ = [
    "from_dh",
    "load_urdf",
    "parse_urdf",
    "robots",
]
