"""Dynamics algorithms: RNEA, CRBA, ABA, M^-1, forward dynamics, energy and momentum, and the
O(n) methods of the literature (Saha UDU^T, Rodriguez-Kreutz operators, Yamane-Nakamura virtual work)."""
from .rnea import (rnea as rnea, bias_forces as bias_forces, gravity_torques as gravity_torques,
                   joint_wrenches as joint_wrenches)
from .crba import crba as crba
from .aba import (aba as aba, aba_factor as aba_factor, aba_unwrapped as aba_unwrapped,
                  minv_apply as minv_apply)
from .minv import minv as minv
from .registry import minv_methods as minv_methods
from .batch_aba import aba_batch as aba_batch
from ..compiled import CPU_OPTIONS as CPU_OPTIONS, CPU_XLA_FLAGS as CPU_XLA_FLAGS
from .forward import forward_dynamics as forward_dynamics, methods as methods
from .energy import (kinetic_energy as kinetic_energy, potential_energy as potential_energy,
                     center_of_mass as center_of_mass, spatial_momentum as spatial_momentum,
                     centroidal_momentum as centroidal_momentum, total_mass as total_mass)
from .udut import (udut as udut, udut_inverse as udut_inverse, udut_forward as udut_forward,
                   denoc as denoc, gim_denoc as gim_denoc, saha_factors as saha_factors)
from .operator import (innovations_factors as innovations_factors,
                       innovations_operators as innovations_operators,
                       minv_operator as minv_operator, operator_fd1 as operator_fd1,
                       operator_fd2 as operator_fd2, operator_fd3 as operator_fd3,
                       operator_fd4 as operator_fd4)
from .virtual_work import virtual_work as virtual_work
from .opspace import (opspace_inverse_inertia as opspace_inverse_inertia,
                      opspace_inertia as opspace_inertia)
from .derivatives import (rnea_derivatives as rnea_derivatives, aba_derivatives as aba_derivatives,
                          derivatives_batch as derivatives_batch)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
