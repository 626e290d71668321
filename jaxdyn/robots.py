"""Built-in robots: ``planar3``, ``stanford_arm``, ``puma560`` (Saha Table II), ``planar_chain``,
``double_pendulum``, ``random_tree``."""
from .io.robots import (planar3, planar_chain, double_pendulum, stanford_arm, puma560, random_tree,
                        random_inertia)

__all__ = ["planar3", "planar_chain", "double_pendulum", "stanford_arm", "puma560", "random_tree",
           "random_inertia"]
