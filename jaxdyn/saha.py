"""Saha's (2003) UDU^T decomposition of the generalized inertia matrix and his DeNOC matrices
(:mod:`jaxdyn.dynamics.udut`); ``forward_dynamics(method="udut")`` runs its O(n) solve."""
from .dynamics.udut import (udut as udut, udut_inverse as udut_inverse, udut_forward as udut_forward,
                            saha_factors as saha_factors, denoc as denoc, gim_denoc as gim_denoc,
                            DeNOC as DeNOC, SahaFactors as SahaFactors)
