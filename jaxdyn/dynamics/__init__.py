"""Dynamics algorithms: RNEA, CRBA, ABA, M^-1, forward dynamics, energy and momentum, and the
O(n) methods of the literature (Saha UDU^T, Rodriguez-Kreutz operators, Yamane-Nakamura virtual work)."""
from .rnea import rnea, bias_forces, gravity_torques, joint_wrenches
from .crba import crba
from .aba import aba, aba_factor, aba_unwrapped, minv_apply
from .minv import minv
from .registry import minv_methods
from .batch import aba_batch, CPU_OPTIONS
from .forward import forward_dynamics, methods
from .energy import (kinetic_energy, potential_energy, center_of_mass, spatial_momentum,
                     centroidal_momentum, total_mass)
from .udut import udut, udut_inverse, udut_forward, denoc, gim_denoc, saha_factors
from .operator import (innovations_factors, innovations_operators, minv_operator, operator_fd1,
                       operator_fd2, operator_fd3, operator_fd4)
from .virtual_work import virtual_work
from .opspace import opspace_inverse_inertia, opspace_inertia
from .derivatives import rnea_derivatives, aba_derivatives, derivatives_batch

__all__ = [
    "minv_methods",
    "rnea",
    "bias_forces",
    "gravity_torques",
    "joint_wrenches",
    "crba",
    "aba",
    "minv",
    "aba_factor",
    "aba_unwrapped",
    "minv_apply",
    "aba_batch",
    "CPU_OPTIONS",
    "forward_dynamics",
    "methods",
    "kinetic_energy",
    "potential_energy",
    "center_of_mass",
    "spatial_momentum",
    "centroidal_momentum",
    "total_mass",
    "udut",
    "udut_inverse",
    "udut_forward",
    "denoc",
    "gim_denoc",
    "saha_factors",
    "innovations_factors",
    "innovations_operators",
    "minv_operator",
    "operator_fd1",
    "operator_fd2",
    "operator_fd3",
    "operator_fd4",
    "virtual_work",
    "opspace_inverse_inertia",
    "opspace_inertia",
    "rnea_derivatives",
    "aba_derivatives",
    "derivatives_batch",
]
