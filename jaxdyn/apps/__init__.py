"""Applications built on the dynamics: system identification of link inertias
(:mod:`jaxdyn.apps.sysid`, ``jaxdyn identify``) and trajectory optimization
(:mod:`jaxdyn.apps.trajopt`, ``jaxdyn trajopt``)."""
from . import sysid, trajopt
from .sysid import (inertial_parameters, with_inertial_parameters, regressor, base_parameters, BaseParameters,
                    identify_least_squares, identify_consistent, ConsistentFit, parameters_from_log_cholesky,
                    consistency_report, simulation_error, identify_simulation_error, Fourier, fourier_eval, fourier_excitation,
                    sample_fourier, regressors, stacked_regressor, condition_number, optimize_excitation)

__all__ = ["sysid", "trajopt", "inertial_parameters", "with_inertial_parameters", "regressor", "base_parameters",
           "BaseParameters", "identify_least_squares", "identify_consistent", "ConsistentFit",
           "parameters_from_log_cholesky", "consistency_report", "simulation_error", "identify_simulation_error", "Fourier", "fourier_eval",
           "fourier_excitation", "sample_fourier", "regressors", "stacked_regressor", "condition_number", "optimize_excitation"]
