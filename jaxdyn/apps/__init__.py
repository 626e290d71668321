"""Applications built on the dynamics: system identification of link inertias
(:mod:`jaxdyn.apps.sysid`, ``jaxdyn identify``) and trajectory optimization
(:mod:`jaxdyn.apps.trajopt`, ``jaxdyn trajopt``)."""
# optax is imported inside the functions that run it, not by these modules: it imports all of
# its contrib optimizers, a noticeable share of `import jaxdyn` (benchmarks/results/history.md).
from . import joint_terms as joint_terms, lbfgs as lbfgs, sysid as sysid, trajopt as trajopt
from .sysid import (inertial_parameters as inertial_parameters,
                    with_inertial_parameters as with_inertial_parameters, regressor as regressor,
                    base_parameters as base_parameters, BaseParameters as BaseParameters,
                    identify_least_squares as identify_least_squares,
                    identify_consistent as identify_consistent, ConsistentFit as ConsistentFit,
                    parameters_from_log_cholesky as parameters_from_log_cholesky,
                    consistency_report as consistency_report, simulation_error as simulation_error,
                    identify_simulation_error as identify_simulation_error, Fourier as Fourier,
                    fourier_eval as fourier_eval, fourier_excitation as fourier_excitation,
                    sample_fourier as sample_fourier, regressors as regressors,
                    stacked_regressor as stacked_regressor, condition_number as condition_number,
                    optimize_excitation as optimize_excitation)

# Star-import and introspection list, derived from the explicit re-exports above.
__all__ = sorted(n for n in dir() if not n.startswith("_"))
