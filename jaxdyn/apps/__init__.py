"""Applications built on the dynamics: system identification of link inertias."""
from .sysid import (inertial_parameters, with_inertial_parameters, regressor, base_parameters, BaseParameters,
                    identify_least_squares)

__all__ = ["inertial_parameters", "with_inertial_parameters", "regressor", "base_parameters", "BaseParameters",
           "identify_least_squares"]
