"""Load and validate the study configuration and the testbed files.

Everything is checked before any job runs.  Errors name the file, the key
(as a dotted path) and what is allowed, e.g.::

    config/config.yaml: experiments.pingpong.mpis[1]: 'intelmpi' is not one of ['openmpi', 'mpich']
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"


class ConfigError(ValueError):
    """An invalid configuration file; the message names file, key and rule."""


def _load_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def load_schema(name: str, schema_dir: Path = SCHEMA_DIR) -> dict:
    return _load_yaml(Path(schema_dir) / name)


def _key_path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _explain(error: jsonschema.ValidationError) -> str:
    """A message a user can act on: what was found and what is allowed."""
    v, s = error.validator, error.schema
    if v == "enum":
        return f"{error.instance!r} is not one of {list(s['enum'])}"
    if v == "pattern":
        desc = s.get("description", "")
        return f"{error.instance!r} does not match the allowed pattern {s['pattern']!r}" + (
            f" ({desc})" if desc else ""
        )
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{error.message}; allowed keys: {allowed}"
    if v == "propertyNames":
        return f"{error.message}"
    return error.message


def validate(data: Any, schema: Mapping, path: Path | str) -> None:
    """Validate ``data`` against ``schema``; raise ConfigError for the first problems."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"{path}: {_key_path(e)}: {_explain(e)}" for e in errors[:10]]
        raise ConfigError("invalid configuration\n  " + "\n  ".join(lines))


def _apply_defaults(data: dict, schema: Mapping) -> dict:
    """Fill in ``default`` values of object properties (recursively)."""
    if not isinstance(data, dict):
        return data
    for key, sub in schema.get("properties", {}).items():
        if key not in data and "default" in sub:
            data[key] = copy.deepcopy(sub["default"])
        if key in data and isinstance(sub, dict):
            _apply_defaults(data[key], sub)
    return data


def _check_study(study: dict, path: Path) -> None:
    for name, exp in study.get("experiments", {}).items():
        if exp.get("min_bytes", 1) > exp.get("max_bytes", 1):
            raise ConfigError(
                f"{path}: experiments.{name}: min_bytes ({exp['min_bytes']}) must not exceed "
                f"max_bytes ({exp['max_bytes']})"
            )


def _check_testbed(tb: dict, path: Path) -> None:
    if tb["name"] != path.stem:
        raise ConfigError(f"{path}: name: {tb['name']!r} must equal the file name {path.stem!r}")
    if tb["kind"] == "native":
        for mpi, entry in tb["mpi"].items():
            if "launcher" not in entry:
                raise ConfigError(f"{path}: mpi.{mpi}.launcher: required for kind 'native'")
    if tb["kind"] != "native" and tb["executor"] != "local":
        raise ConfigError(f"{path}: executor: kind {tb['kind']!r} runs with the local executor only")
    for mpi, entry in tb["mpi"].items():
        adv = entry.get("advect")
        if adv and tb["kind"] == "native" and tb["nodes"] > 1 and not any("{block}" in a for a in adv.get("args", [])):
            raise ConfigError(
                f"{path}: mpi.{mpi}.advect.args: a native testbed with several nodes places ranks through "
                "launcher arguments and needs one with '{block}' (e.g. --distribution=plane={block})"
            )
    runtime = tb.get("runtime", {"kind": "none"})
    if runtime["kind"] != "none" and "image" not in runtime:
        raise ConfigError(f"{path}: runtime.image: required when runtime.kind is {runtime['kind']!r}")


def placement_offers(testbeds: dict) -> dict[str, list[str]]:
    """MPIs each testbed can run the placement experiment with: it needs the
    benchmark (mpi.<name>.advect) and at least two hosts or guests."""
    return {name: sorted(m for m, e in tb["mpi"].items() if "advect" in e) if tb["nodes"] > 1 else []
            for name, tb in testbeds.items()}


def _check_offers(study: dict, testbeds: dict, study_path: Path, testbed_dir: Path) -> None:
    """Each testbed runs the MPIs and paths of the study that it offers; a
    requested MPI or path that no testbed offers is an error."""
    pp = study.get("experiments", {}).get("pingpong")
    for mpi in pp["mpis"] if pp and pp.get("enabled", True) else []:
        for p in pp["paths"]:
            if not any(p in tb["mpi"].get(mpi, {}).get("paths", {}) for tb in testbeds.values()):
                offered = sorted({f"{m}/{q}" for tb in testbeds.values() for m in tb["mpi"] for q in tb["mpi"][m]["paths"]})
                raise ConfigError(
                    f"{study_path}: experiments.pingpong: {mpi} over path {p!r} is offered by none of the testbeds "
                    f"{sorted(testbeds)} (files in {testbed_dir}); they offer {offered}"
                )
    pl = study.get("experiments", {}).get("placement")
    if pl and pl.get("enabled", True):
        offers = placement_offers(testbeds)
        for mpi in pl["mpis"]:
            if not any(mpi in v for v in offers.values()):
                raise ConfigError(
                    f"{study_path}: experiments.placement: {mpi} is offered by none of the testbeds "
                    f"{sorted(testbeds)} (files in {testbed_dir}): the placement experiment needs a testbed "
                    f"with nodes >= 2 and mpi.{mpi}.advect (offered: {offers}); on one-host testbeds set "
                    "experiments.placement.enabled: false"
                )


def load_study(
    config: Mapping | None = None,
    *,
    config_path: Path | str = "config/config.yaml",
    testbed_dir: Path | str = "config/testbeds",
    schema_dir: Path | str = SCHEMA_DIR,
) -> tuple[dict, dict[str, dict]]:
    """Return (study, {testbed name: testbed}) validated and with defaults.

    ``config`` is the already-loaded study (Snakemake's ``config``, which may
    carry --config overrides); without it the file is read.
    """
    config_path = Path(config_path)
    study = copy.deepcopy(dict(config)) if config is not None else _load_yaml(config_path)
    if not isinstance(study, dict):
        raise ConfigError(f"{config_path}: expected a mapping at the top level")
    schema = load_schema("config.schema.yaml", Path(schema_dir))
    validate(study, schema, config_path)
    _apply_defaults(study, schema)
    _check_study(study, config_path)

    tb_schema = load_schema("testbed.schema.yaml", Path(schema_dir))
    testbeds = {}
    for name in study["testbeds"]:
        path = Path(testbed_dir) / f"{name}.yaml"
        tb = _load_yaml(path)
        if not isinstance(tb, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        validate(tb, tb_schema, path)
        _apply_defaults(tb, tb_schema)
        tb.setdefault("runtime", {"kind": "none"})
        _check_testbed(tb, path)
        testbeds[name] = tb
    _check_offers(study, testbeds, config_path, Path(testbed_dir))
    # What each testbed offers, for the configuration matrix (hpcvirt.matrix).
    study["offers"] = {name: {m: sorted(e["paths"]) for m, e in tb["mpi"].items()} for name, tb in testbeds.items()}
    study["placement_offers"] = placement_offers(testbeds)
    return study, testbeds
