"""Dynamics algorithms: RNEA, CRBA, ABA, M^-1, forward dynamics, energy and momentum."""
from .rnea import rnea, bias_forces, gravity_torques
from .crba import crba
from .aba import aba, minv, aba_factor
from .forward import forward_dynamics, methods
from .energy import (kinetic_energy, potential_energy, center_of_mass, spatial_momentum,
                     centroidal_momentum, total_mass)
