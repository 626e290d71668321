"""A user's first call of a public function, outside any ``jax.jit``, compiles one program (its
own, plus at most a couple of tiny ones converting its inputs), not one per primitive: a
function that ran op by op compiled 27-200 programs on its first call (``mechanisms.quadruped()``
9 s, ``operators.operator_fd1`` 4 s before they were jitted at their entry).  Counted with
JAX's own compile events, each function on fresh caches."""
import jax
import jax.numpy as jnp
import numpy as np

import jaxdyn

MAX_PROGRAMS = 3          # the function's program and the conversions of its inputs
MAX_BUILDER_PROGRAMS = 20  # a builder also converts its numpy data and calls a few public functions
#                           (7-11 here; op by op they compiled 76-200)


def _calls():
    m = jaxdyn.robots.planar3()
    q, v = jnp.asarray([0.3, -0.4, 0.5]), jnp.asarray([0.2, -0.1, 0.3])
    cm, qc = jaxdyn.mechanisms.four_bar()
    qc, vc = jnp.asarray(qc), jnp.zeros(cm.model.nv)
    W = jnp.asarray(np.random.default_rng(0).normal(size=(12, 30)))
    pose, q0 = jaxdyn.frame_pose(m, q, "ee"), jaxdyn.neutral(m)
    pi, theta = jaxdyn.sysid.inertial_parameters(m), jaxdyn.log_cholesky_parameters(m)
    gs, qg = jaxdyn.mechanisms.arms_holding_box(2, form="grasp")
    qg = jnp.asarray(qg)
    return {
        "random_configuration": lambda: jaxdyn.random_configuration(m, jax.random.PRNGKey(0)),
        "integrate": lambda: jaxdyn.integrate(m, q, v), "difference": lambda: jaxdyn.difference(m, q, q),
        "normalize": lambda: jaxdyn.normalize(m, q), "forward_kinematics": lambda: jaxdyn.forward_kinematics(m, q),
        "frame_pose": lambda: jaxdyn.frame_pose(m, q, "ee"), "frame_poses": lambda: jaxdyn.frame_poses(m, q),
        "frame_jacobian": lambda: jaxdyn.frame_jacobian(m, q, "ee"),
        "frame_velocity": lambda: jaxdyn.frame_velocity(m, q, v, "ee"),
        "frame_acceleration": lambda: jaxdyn.frame_acceleration(m, q, v, v, "ee"),
        "center_of_mass": lambda: jaxdyn.center_of_mass(m, q),
        "centroidal_momentum": lambda: jaxdyn.centroidal_momentum(m, q, v),
        "spatial_momentum": lambda: jaxdyn.spatial_momentum(m, q, v),
        "kinetic_energy": lambda: jaxdyn.kinetic_energy(m, q, v), "potential_energy": lambda: jaxdyn.potential_energy(m, q),
        "aba": lambda: jaxdyn.aba(m, q, v, v), "rnea": lambda: jaxdyn.rnea(m, q, v, v), "crba": lambda: jaxdyn.crba(m, q),
        "minv": lambda: jaxdyn.minv(m, q), "bias_forces": lambda: jaxdyn.bias_forces(m, q, v),
        "gravity_torques": lambda: jaxdyn.gravity_torques(m, q),
        "joint_wrenches": lambda: jaxdyn.joint_wrenches(m, q, v, v), "virtual_work": lambda: jaxdyn.virtual_work(m, q, v, v),
        "aba_derivatives": lambda: jaxdyn.aba_derivatives(m, q, v, v),
        "rnea_derivatives": lambda: jaxdyn.rnea_derivatives(m, q, v, v),
        "log_cholesky_parameters": lambda: jaxdyn.log_cholesky_parameters(m),
        "with_log_cholesky_parameters": lambda: jaxdyn.with_log_cholesky_parameters(m, jnp.zeros((m.nb, 10))).mass,
        "saha.udut": lambda: jaxdyn.saha.udut(m, q), "saha.denoc": lambda: jaxdyn.saha.denoc(m, q),
        "saha.gim_denoc": lambda: jaxdyn.saha.gim_denoc(m, q), "saha.udut_forward": lambda: jaxdyn.saha.udut_forward(m, q, v),
        "saha.udut_inverse": lambda: jaxdyn.saha.udut_inverse(m, q),
        "saha.saha_factors": lambda: jaxdyn.saha.saha_factors(m, q),
        "operators.innovations_factors": lambda: jaxdyn.operators.innovations_factors(m, q),
        "operators.innovations_operators": lambda: jaxdyn.operators.innovations_operators(m, q),
        "operators.operator_fd1": lambda: jaxdyn.operators.operator_fd1(m, q, v, v),
        "operators.operator_fd2": lambda: jaxdyn.operators.operator_fd2(m, q, v, v),
        "operators.operator_fd3": lambda: jaxdyn.operators.operator_fd3(m, q, v, v),
        "operators.operator_fd4": lambda: jaxdyn.operators.operator_fd4(m, q, v, v),
        "operators.minv_operator": lambda: jaxdyn.operators.minv_operator(m, q),
        "operators.opspace_inverse_inertia": lambda: jaxdyn.operators.opspace_inverse_inertia(m, q, ["ee"]),
        "sysid.regressor": lambda: jaxdyn.sysid.regressor(m, q, v, v),
        "sysid.stacked_regressor": lambda: jaxdyn.sysid.stacked_regressor(m, q[None], v[None], v[None]),
        "sysid.with_inertial_parameters": lambda: jaxdyn.sysid.with_inertial_parameters(m, pi).mass,
        "sysid.parameters_from_log_cholesky": lambda: jaxdyn.sysid.parameters_from_log_cholesky(theta),
        "sysid.consistency_report": lambda: jaxdyn.sysid.consistency_report(m, pi),
        "inverse_kinematics": lambda: jaxdyn.inverse_kinematics(m, "ee", *pose, q0)[0],
        "operators.opspace_inertia": lambda: jaxdyn.operators.opspace_inertia(m, q, "ee"),
        "rollout": lambda: jaxdyn.rollout(m, q, v, None, 0.01, 5).q,
        "constraint_residual": lambda: jaxdyn.constraint_residual(cm, qc),
        "constraint_jacobian": lambda: jaxdyn.constraint_jacobian(cm, qc),
        "constraints.grasp_residual": lambda: jaxdyn.constraints.grasp_residual(gs, qg),
        "constraints.constraint_bias": lambda: jaxdyn.constraints.constraint_bias(cm, qc, vc),
        "constraints.rows.delassus": lambda: jaxdyn.constraints.rows.delassus(cm, qc),
        "project_constraints": lambda: jaxdyn.project_constraints(cm, qc, vc),
        "constrained_forward_dynamics": lambda: jaxdyn.constrained_forward_dynamics(cm, qc, vc, vc).qdd,
        "sysid.base_parameters": lambda: jaxdyn.sysid.base_parameters(W).beta,
    }


BUILDERS = {
    "mechanisms.four_bar": lambda: jaxdyn.mechanisms.four_bar(),
    "mechanisms.five_bar": lambda: jaxdyn.mechanisms.five_bar(),
    "mechanisms.quadruped": lambda: jaxdyn.mechanisms.quadruped(),
    "mechanisms.arms_holding_box": lambda: jaxdyn.mechanisms.arms_holding_box(2, form="grasp"),
}


def _compiles(fn):
    """Backend compilations during fn() on empty caches."""
    events = []

    def listen(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            events.append(event)
    jax.clear_caches()
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        jax.block_until_ready(jax.tree_util.tree_leaves(fn()))
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return len(events)


def test_first_eager_call_compiles_one_program():
    counts = {name: _compiles(fn) for name, fn in _calls().items()}
    counts.update({name: _compiles(fn) for name, fn in BUILDERS.items()})
    over = {k: n for k, n in counts.items() if n > (MAX_BUILDER_PROGRAMS if k in BUILDERS else MAX_PROGRAMS)}
    assert not over, f"op by op on a first eager call (programs compiled): {over}"
    # the count sees an op-by-op function: the same work unjitted compiles one program per primitive
    m = jaxdyn.robots.planar3()
    assert _compiles(lambda: jaxdyn.log_cholesky_parameters.__wrapped__(m)) > 10 * MAX_PROGRAMS
