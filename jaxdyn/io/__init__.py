"""Model builders: standard DH tables, URDF, built-in robots."""
from .dh import from_dh as from_dh
from .urdf import load_urdf as load_urdf, parse_urdf as parse_urdf
from . import robots as robots
