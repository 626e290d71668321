"""Model builders: standard DH tables, URDF, built-in robots."""
from .dh import from_dh as from_dh
from .urdf import load_urdf as load_urdf, parse_urdf as parse_urdf
from .urdf_out import save_urdf as save_urdf
from .mjcf import load_mjcf as load_mjcf
from . import mjcf as mjcf
from . import robots as robots

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
