"""Simulation configs (TOML): schema, defaults and validation naming the offending key."""
from __future__ import annotations

import math
import os
import tomllib
from importlib import resources

from .errors import ConfigError

SCHEMA = {
    "robot": {"name": str},
    "simulation": {"T": float, "dt": float, "integrator": str, "rtol": float, "atol": float, "method": str,
                   "stabilization": list},
    "initial": {"q0": list, "qd0": list},
    "control": {"type": str, "q_final": list, "kp": float, "kd": float},
}
DEFAULTS = {
    "simulation": {"T": 10.0, "dt": 0.01, "integrator": "rkf45", "rtol": 1e-8, "atol": 1e-10, "method": "aba"},
    "control": {"type": "zero"},
}
DEFAULT_CONFIG = "puma_freefall"
MAX_STEPS = 10_000_000
"""Largest number of samples T / dt a config may ask for (int32 scan indices; ~1 GB of output
for a 6-dof robot)."""


def sim_steps(cfg) -> int:
    """Number of samples round(T / dt) of a validated config."""
    s = cfg["simulation"]
    return int(round(s["T"] / s["dt"]))


APP_PREFIXES = ("trajopt_", "identify_")
"""Built-in configs of ``jaxdyn trajopt`` / ``jaxdyn identify`` are named with these prefixes."""


def builtin_configs(kind="all"):
    """Names of the built-in configs: "all", "simulate" (no app prefix), "trajopt" or "identify"."""
    names = sorted(p.name[:-5] for p in resources.files("jaxdyn.configs").iterdir() if p.name.endswith(".toml"))
    if kind == "simulate":
        return [n for n in names if not n.startswith(APP_PREFIXES)]
    if kind in ("trajopt", "identify"):
        return [n for n in names if n.startswith(kind + "_")]
    return names


def load_config(path=None) -> dict:
    """Read a simulation TOML config (path, or the name of a built-in one), validate, fill
    defaults."""
    raw, name = read_toml(path, DEFAULT_CONFIG)
    return validate(raw, name)


def check_tables(raw: dict, name: str, schema: dict, defaults: dict, allow_inf=()) -> dict:
    """Type-check a parsed TOML dict against ``schema`` ({section: {key: type}}; types
    float, int, str, bool, list (of finite numbers; +inf also in the lists ``allow_inf`` names
    as "section.key")), naming the offending key; fill ``defaults``."""
    cfg = {"name": name}
    for sec, val in raw.items():
        if sec not in schema:
            raise ConfigError(f"{name}: unknown section [{sec}]; known: {sorted(schema)}")
        if not isinstance(val, dict):
            raise ConfigError(f"{name}: [{sec}] must be a table")
        for k, v in val.items():
            if k not in schema[sec]:
                raise ConfigError(f"{name}: unknown key {sec}.{k}; known: {sorted(schema[sec])}")
            typ = schema[sec][k]
            if typ is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if typ is bool:
                if not isinstance(v, bool):
                    raise ConfigError(f"{name}: {sec}.{k} must be true or false, got {v!r}")
                continue
            if not isinstance(v, typ) or isinstance(v, bool):
                raise ConfigError(f"{name}: {sec}.{k} must be {typ.__name__}, got {type(v).__name__} {v!r}")
            if typ is list:
                if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                    raise ConfigError(f"{name}: {sec}.{k} must be a list of numbers, got {v!r}")
                v = [float(x) for x in v]
                if any(not math.isfinite(x) and not (x == math.inf and f"{sec}.{k}" in allow_inf) for x in v):
                    raise ConfigError(f"{name}: {sec}.{k} contains NaN or inf: {v!r}")
            if typ is float and not math.isfinite(v):
                raise ConfigError(f"{name}: {sec}.{k} must be finite, got {v!r}")
        cfg[sec] = dict(val)
        for k, v in val.items():
            if schema[sec][k] is float:
                cfg[sec][k] = float(v)
            elif schema[sec][k] is list:
                cfg[sec][k] = [float(x) for x in v]
    for sec, d in defaults.items():
        cfg[sec] = {**d, **cfg.get(sec, {})}
    return cfg


def read_toml(path, default, kind="simulate"):
    """(raw dict, name) of a TOML file path, or of a built-in config name."""
    if path is None:
        path = default
    if os.path.isdir(path):
        raise ConfigError(f"config {path!r} is a directory, not a TOML file")
    if not os.path.exists(path):
        name = os.path.basename(path)[:-5] if path.endswith(".toml") else path
        if name in builtin_configs():
            text = (resources.files("jaxdyn.configs") / f"{name}.toml").read_text()
            return tomllib.loads(text), name
        known = builtin_configs(kind)
        raise ConfigError(f"config {path!r} not found (built-in configs: {known})")
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read: {e}") from None
    return raw, os.path.splitext(os.path.basename(path))[0]


def validate(raw: dict, name: str) -> dict:
    """A simulation config: types (:func:`check_tables`), defaults and value checks."""
    cfg = check_tables(raw, name, SCHEMA, {})
    for sec, d in DEFAULTS.items():
        cfg[sec] = {**d, **cfg.get(sec, {})}
    if "robot" not in cfg or "name" not in cfg["robot"]:
        raise ConfigError(f"{name}: missing robot.name")
    s = cfg["simulation"]
    if s["dt"] <= 0:
        raise ConfigError(f"{name}: simulation.dt must be > 0, got {s['dt']}")
    if s["T"] <= 0:
        raise ConfigError(f"{name}: simulation.T must be > 0, got {s['T']}")
    ratio = s["T"] / s["dt"]
    if ratio < 0.5:
        raise ConfigError(f"{name}: simulation.T = {s['T']} is shorter than one step simulation.dt = {s['dt']}")
    if ratio > MAX_STEPS:
        raise ConfigError(f"{name}: simulation.T / simulation.dt = {ratio:.3g} samples; at most {MAX_STEPS} "
                          "are allowed (lengthen dt or shorten T)")
    from .io.mechanisms import MECHANISMS
    check_method(cfg, cfg["robot"]["name"] in MECHANISMS)
    if "stabilization" in s and (len(s["stabilization"]) != 2 or min(s["stabilization"]) < 0):
        raise ConfigError(f"{name}: simulation.stabilization must be [alpha, beta] >= 0 (Baumgarte gains), "
                          f"got {s['stabilization']!r}")
    if s["integrator"] not in ("euler", "rk4", "rkf45", "abm"):
        raise ConfigError(f"{name}: simulation.integrator must be euler|rk4|rkf45|abm, got {s['integrator']!r}")
    if cfg["control"]["type"] not in ("zero", "feedforward", "computed_torque", "hold"):
        raise ConfigError(f"{name}: control.type must be zero|feedforward|computed_torque|hold")
    if cfg["control"]["type"] not in ("zero", "hold") and "q_final" not in cfg["control"]:
        raise ConfigError(f"{name}: control.q_final is required for control.type = "
                          f"{cfg['control']['type']!r}")
    return cfg


def check_method(cfg, closed):
    """Raise ConfigError unless ``simulation.method`` can run the config's robot: any forward
    dynamics method for a tree; for a ``closed`` robot (a mechanism, or an MJCF file with
    equalities) "schur", "kkt" or "aba", and "rccfd" / "lilly_orin" on the chain-structured
    mechanisms."""
    from .batching import methods
    from .io.mechanisms import STRUCTURED
    name, rname, method = cfg["name"], cfg["robot"]["name"], cfg["simulation"]["method"]
    allowed = (("schur", "kkt", "aba") + (("rccfd", "lilly_orin") if rname in STRUCTURED else ())) if closed \
        else methods()
    if method not in allowed:
        why = (f" ('rccfd' and 'lilly_orin' need chains on one reference member: {sorted(STRUCTURED)}; "
               f"{rname!r} is a general loop closure)") if closed and method in ("rccfd", "lilly_orin") else ""
        raise ConfigError(f"{name}: simulation.method must be one of {list(allowed)}, got {method!r}{why}")
