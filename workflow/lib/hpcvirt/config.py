"""Load and validate the study configuration and the testbed files.

Everything is checked before any job runs.  Errors name the file, the key
(as a dotted path) and what is allowed, e.g.::

    config/config.yaml: experiments.pingpong.mpis[1]: 'intelmpi' is not one of ['openmpi', 'mpich']

The schemas are the files in ``workflow/schemas/`` completed by the
benchmark declarations (:mod:`hpcvirt.benchmarks`): each declaration
contributes ``experiments.<experiment>`` to the study schema and its entry
(``mpi.<mpi>.<benchmark>`` for MPI benchmarks, ``<benchmark>`` otherwise) to
the testbed schema.
"""

from __future__ import annotations

import copy
import re
import string
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from . import link, paths, yamlio
from .benchmarks import REGISTRY, enabled
from .matrix import configurations
from .provenance import config_hash
from .kinds import KINDS
from .testbeds import fabric_problem


class ConfigError(ValueError):
    """An invalid configuration file; the message names file, key and rule."""


def _load_yaml(path: Path) -> Any:
    try:
        return yamlio.load_file(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    except yamlio.Refused as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def check_files(paths) -> None:
    """Refuse study files that cannot be read safely (:mod:`hpcvirt.yamlio`:
    duplicate keys, size, encoding, alias bombs, nesting), each error naming
    the file and the key.  The workflow checks ``config/config.yaml`` and the
    ``--configfile`` overlays with it before its own loading uses them."""
    for path in paths:
        if not isinstance(_load_yaml(Path(path)), dict):      # Snakemake's own message would not name it
            raise ConfigError(f"{path}: empty, or not a mapping of keys to values at its top level")


def load_schema(name: str, schema_dir: Path | None = None) -> dict:
    """A schema of ``workflow/schemas/``, completed by the benchmark declarations."""
    schema = _load_yaml(Path(schema_dir or paths.schemas()) / name)
    if name == "config.schema.yaml":
        schema["properties"]["experiments"]["properties"] = {b.experiment: b.schema() for b in REGISTRY}
        schema["properties"]["emulated_guests"]["properties"]["experiments"]["items"]["enum"] = sorted(
            {b.experiment for b in REGISTRY})
    elif name == "testbed.schema.yaml":
        entry = schema["$defs"]["benchmark"]
        per_mpi = schema["properties"]["mpi"]["additionalProperties"]["properties"]
        for b in REGISTRY:
            s = copy.deepcopy(entry)
            s["description"] = f"{b.title}; {b.build.describe()}. Absent: not offered."
            s["properties"].update(copy.deepcopy(b.testbed_keys))
            if b.mpi:
                per_mpi[b.name] = s
            else:
                schema["properties"][b.name] = s
    return schema


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
        desc = f" ({s['description']})" if s.get("description") else ""
        return f"{error.instance!r} does not match the allowed pattern {s['pattern']!r}{desc}"
    if v == "additionalProperties":
        return f"{error.message}; allowed keys: {sorted(s.get('properties', {}))}"
    why = s.get("description") if isinstance(s, dict) and v in ("not", "required", "const") else ""
    return (f"{error.instance!r} is not allowed here" if v == "not" else error.message) + (f" ({why})" if why else "")


def _pattern(validator, pattern, instance, schema):
    """``pattern`` up to the string's end: Python's ``$`` also matches before a final newline."""
    if validator.is_type(instance, "string") and not re.search(pattern.removesuffix("$") + r"\Z", instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern}, type_checker=jsonschema
                                          .Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _, x: type(x) is int))


def validate(data: Any, schema: Mapping, path: Path | str) -> None:
    """Validate ``data`` against ``schema``; raise ConfigError for the first problems.  An integer is one
    as written: JSON Schema takes 3.0 for one, which would name a new configuration (``_i100.0``)."""
    errors = sorted(_Validator(schema).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
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
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and "properties" in extra:
        for key, value in data.items():
            if key not in schema.get("properties", {}):
                _apply_defaults(value, extra)
    return data


def _check_study(study: dict, path: Path) -> None:
    for bench, exp in enabled(study):
        for kind in (None, *sorted((exp.get("by_kind") or {}))):
            where, settings = (f" (with by_kind.{kind})" if kind else ""), bench.for_kind(exp, kind)
            problem = bench.check(settings)
            if problem:
                raise ConfigError(f"{path}: experiments.{bench.experiment}{where}: {problem}")
        for testbed in sorted(exp.get("by_testbed") or {}):
            problem = bench.check(bench.for_kind(exp, None, testbed))
            if problem:
                raise ConfigError(f"{path}: experiments.{bench.experiment} (with by_testbed.{testbed}): {problem}")


def _templates(tb: dict):
    """(dotted key, words) of every argv template of a testbed."""
    for mpi, entry in tb["mpi"].items():
        yield f"mpi.{mpi}.launcher", entry.get("launcher", [])
        for p, path_entry in entry.get("paths", {}).items():
            yield f"mpi.{mpi}.paths.{p}.args", path_entry.get("args", [])
        for b in REGISTRY:
            if b.mpi and b.name in entry:
                yield f"mpi.{mpi}.{b.name}.args", entry[b.name].get("args", [])
    for b in REGISTRY:
        if not b.mpi and b.name in tb:
            yield f"{b.name}.args", tb[b.name].get("args", [])


def _check_testbed(tb: dict, path: Path) -> None:
    if tb["name"] != path.stem:
        raise ConfigError(f"{path}: name: {tb['name']!r} must equal the file name {path.stem!r}")
    kind = KINDS[tb["kind"]]
    wrapping = sorted(k for k, c in KINDS.items() if c.wraps_ranks)
    if not kind.wraps_ranks and tb["executor"] != "local":
        raise ConfigError(f"{path}: executor: kind {tb['kind']!r} runs with the local executor only")
    if not kind.wraps_ranks and tb["runtime"]["kind"] != "none":
        raise ConfigError(f"{path}: runtime.kind: a container runtime wraps the ranks of kind "
                          f"{' or '.join(map(repr, wrapping))} only (this testbed is {tb['kind']!r})")
    allowed = kind.placeholders
    for key, words in _templates(tb):
        for i, word in enumerate(words):
            try:
                fields = list(string.Formatter().parse(str(word)))
            except ValueError as exc:       # e.g. a lone brace
                raise ConfigError(f"{path}: {key}[{i}]: {word!r} is not a template: {exc}") from None
            for _, name, spec, conversion in fields:
                if name is not None and name not in allowed:
                    raise ConfigError(f"{path}: {key}[{i}]: placeholder {{{name}}} is not one of "
                                      f"{sorted(allowed)} (kind {tb['kind']!r})")
                if spec or conversion:
                    raise ConfigError(f"{path}: {key}[{i}]: placeholder {{{name}}} takes no format spec or "
                                      f"conversion (found {word!r}); write {{{name}}} alone")
    for b in REGISTRY:
        entries = [(f"mpi.{m}.{b.name}", e[b.name]) for m, e in tb["mpi"].items() if b.name in e] if b.mpi else (
            [(b.name, tb[b.name])] if b.name in tb else [])
        for key, entry in entries:
            problem = b.check_testbed(tb, entry)
            if problem:
                raise ConfigError(f"{path}: {key}.args: {problem}")
    for m, entry in tb["mpi"].items():      # a site's fabric against the transports its settings select
        for name, p in entry.get("paths", {}).items():
            problem = fabric_problem(p)
            if problem:
                raise ConfigError(f"{path}: mpi.{m}.paths.{name}.fabric: {problem}" + (
                    f" (a file that extends {tb['extends']} inherits its fabric with any path it changes)"
                    if "extends" in tb else ""))
    shaped = [k for k in ("rate", "delay_us") if k in tb.get("network", {})]
    if shaped and not kind.own_link:
        linked = " and ".join(k for k, c in KINDS.items() if c.own_link)
        raise ConfigError(f"{path}: network.{shaped[0]}: a link setting of the two-host kinds {linked} "
                          f"(this testbed is {tb['kind']!r})")
    net = tb.get("network", {})
    allowed_paths = kind.network_paths
    if net.get("path", "bridge") not in allowed_paths:
        owner = " or ".join(k for k, c in KINDS.items() if net["path"] in c.network_paths)
        raise ConfigError(f"{path}: network.path: {net['path']!r} is a data path of {owner} testbeds "
                          f"(this testbed is {tb['kind']!r}); allowed here: {', '.join(allowed_paths)}")
    if "underlay" in net and net.get("path") not in link.TUNNELS:
        raise ConfigError(f"{path}: network.underlay: the underlay of a tunnel (network.path "
                          f"{' or '.join(link.TUNNELS)}), not of {net.get('path', 'bridge')!r}")
    if net.get("path") == "gretap" and tb["nodes"] != 2:
        raise ConfigError(f"{path}: network.path: a gretap tunnel joins two hosts, not nodes: {tb['nodes']}")
    if net.get("path") in ("macvlan", "macvtap") and net.get("delay_us"):
        raise ConfigError(f"{path}: network.delay_us: {net['path']} has no switch port for a delay (allowed: rate)")
    runtime = tb["runtime"]
    if runtime["kind"] != "none" and "image" not in runtime:
        raise ConfigError(f"{path}: runtime.image: required when runtime.kind is {runtime['kind']!r}")


def offers(tb: dict) -> dict[str, dict | None]:
    """What a testbed offers, per benchmark: for MPI benchmarks ``{mpi:
    [paths]}`` (the MPIs that define the benchmark's entry, if the testbed
    has enough hosts), for client/server ones ``{}`` when the testbed has the
    entry; benchmarks it does not offer are absent."""
    out: dict[str, dict] = {}
    for b in REGISTRY:
        if tb["nodes"] < b.min_hosts:
            continue
        if b.mpi:
            mpis = {m: sorted(e["paths"]) for m, e in tb["mpi"].items() if b.name in e}
            if mpis:
                out[b.name] = mpis
        elif b.name in tb:
            out[b.name] = {}
    return out


def _check_offers(study: dict, testbeds: dict, study_path: Path, testbed_dir: Path) -> list[str]:
    """Each testbed runs the configurations of the study that it offers; a
    requested MPI or path that no testbed offers is an error, or, with
    ``skip_unoffered``, one line of the returned list of what is skipped."""
    per_tb = {name: offers(tb) for name, tb in testbeds.items()}
    skipped: list[str] = []

    def unoffered(message: str) -> None:
        if not study.get("skip_unoffered"):
            raise ConfigError(message)
        skipped.append(message.partition(": ")[2].split(" (files in")[0])

    for bench, exp in enabled(study):
        where = f"{study_path}: experiments.{bench.experiment}"
        chosen = {t: o for t, o in per_tb.items() if t not in exp.get("skip_testbeds", [])}
        for key, named in (("skip_testbeds", exp.get("skip_testbeds", [])), ("by_testbed", exp.get("by_testbed") or {})):
            unknown = [t for t in named if not (testbed_dir / f"{t}.yaml").is_file()]
            if unknown:
                raise ConfigError(f"{where}.{key}: {unknown} are not testbeds (no file "
                                  f"{testbed_dir}/<name>.yaml); allowed: "
                                  f"{sorted(p.stem for p in testbed_dir.glob('*.yaml'))}")
        if not chosen:
            unoffered(f"{where}: every testbed of the study {sorted(testbeds)} is in its skip_testbeds "
                      f"(files in {testbed_dir})")
            continue
        if not bench.mpi:
            if not any(bench.name in o for o in chosen.values()):
                unoffered(f"{where}: {bench.name} is offered by none of the testbeds {sorted(chosen)} "
                          f"(files in {testbed_dir}: add a '{bench.name}:' entry)")
            continue
        path_param = next((k for k, p in bench.params.items() if p.offered_by == "path"), None)
        for mpi in exp["mpis"]:
            for p in (exp[path_param] if path_param else [None]):
                if any(mpi in o.get(bench.name, {}) and (p is None or p in o[bench.name][mpi])
                       for o in chosen.values()):
                    continue
                offered = sorted({f"{m}/{q}" for o in chosen.values() for m, qs in o.get(bench.name, {}).items()
                                  for q in qs})
                what = f"{mpi} over path {p!r}" if p else mpi
                hint = f"; {bench.unoffered_hint}" if bench.unoffered_hint else ""
                unoffered(
                    f"{where}: {what} is offered by none of the testbeds {sorted(chosen)} (files in "
                    f"{testbed_dir}: mpi.{mpi}.{bench.name}"
                    + (f" and mpi.{mpi}.paths.{p}" if p else "") + f"); they offer {offered}{hint}"
                    + ("" if study.get("skip_unoffered") else
                       "; to run only what they offer, set skip_unoffered: true (--config skip_unoffered=True)")
                )
    return skipped


def archived_campaign() -> str | None:
    """The campaign config/config.yaml names: the archive the paper uses."""
    try:
        return _load_yaml(paths.root() / "config" / "config.yaml")["campaign"]
    except (ConfigError, KeyError, TypeError):
        return None


def testbed_hash(tb: dict) -> str:
    """Identity of a testbed's effective settings (file content with defaults,
    without its free-text description), recorded with every raw output: a
    campaign never mixes two versions."""
    return config_hash({k: v for k, v in tb.items() if k != "description"})


def _merge(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``: mappings merged key by key, a key set to null removed."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def load_testbed(path: Path, schema: dict | None = None) -> dict:
    if not path.is_file() and path.parent.is_dir():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"{path}: file not found; testbeds: {', '.join(known)}")
    tb = _load_yaml(path)
    if not isinstance(tb, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    if "extends" in tb:
        # the other testbed's file with this file's keys on top (mappings merged key by key)
        base_name = tb["extends"]
        base_path = path.parent / f"{base_name}.yaml"
        if not isinstance(base_name, str) or not re.fullmatch(r"[a-z][a-z0-9-]{0,31}", base_name) \
                or not base_path.is_file():
            raise ConfigError(f"{path}: extends: {base_name!r} is not a testbed file of {path.parent}")
        base = _load_yaml(base_path)
        if not isinstance(base, dict) or "extends" in base:
            raise ConfigError(f"{path}: extends: {base_path} must be a testbed that extends no other")
        tb = _merge(base, tb)
    schema = schema or load_schema("testbed.schema.yaml")
    validate(tb, schema, f"{path.parent / tb['extends']}.yaml + {path}" if "extends" in tb else path)
    _apply_defaults(tb, schema)
    _check_testbed(tb, path)
    return tb


def load_study(
    config: Mapping | None = None,
    *,
    config_path: Path | str = "config/config.yaml",
    testbed_dir: Path | str = "config/testbeds",
    schema_dir: Path | str | None = None,
) -> tuple[dict, dict[str, dict]]:
    """Return (study, {testbed name: testbed}) validated and with defaults.

    ``config`` is the already-loaded study (Snakemake's ``config``, which may
    carry --config overrides); without it the file is read.  Relative paths
    are relative to the workflow's working directory.
    """
    config_path = Path(config_path)
    study = copy.deepcopy(dict(config)) if config is not None else _load_yaml(config_path)
    if not isinstance(study, dict):
        raise ConfigError(f"{config_path}: expected a mapping at the top level")
    schema = load_schema("config.schema.yaml", schema_dir and Path(schema_dir))
    validate(study, schema, config_path)
    _apply_defaults(study, schema)
    _check_study(study, config_path)

    tb_schema = load_schema("testbed.schema.yaml", schema_dir and Path(schema_dir))
    testbed_dir = Path(testbed_dir)
    testbeds = {name: load_testbed(testbed_dir / f"{name}.yaml", tb_schema) for name in study["testbeds"]}
    skipped = _check_offers(study, testbeds, config_path, testbed_dir)
    # What each testbed offers, for the configuration matrix (hpcvirt.matrix).
    study["offers"] = {name: offers(tb) for name, tb in testbeds.items()}
    study["kinds"] = {name: tb["kind"] for name, tb in testbeds.items()}
    # guests that will be emulated (TCG) run only emulated_guests.experiments (hpcvirt.matrix)
    study["emulated"] = emulated(testbeds)
    study["skipped"] = skipped
    if skipped and not configurations(study):
        raise ConfigError(f"{config_path}: nothing to run: the testbeds {sorted(testbeds)} offer none of the "
                          f"study's experiments (skipped: " + "; ".join(skipped) + ")")
    return study, testbeds


def emulated_note(study: dict) -> list[str]:
    """What the plan leaves out of guests that would be emulated, a line per testbed (none where it leaves
    nothing out)."""
    experiment = {b.name: b.experiment for b in REGISTRY}
    out = []
    for name, why in study.get("emulated", {}).items():
        ran = lambda s: {experiment[c.benchmark] for c in configurations(s) if c.testbed == name}  # noqa: E731
        left = sorted(ran(dict(study, emulated={})) - ran(study))
        if left:
            out.append(f"{name}: its guests would be emulated ({why}) and their numbers measure the emulator: "
                       f"they run only {', '.join(study['emulated_guests']['experiments']) or 'nothing'} "
                       f"(emulated_guests.experiments), which shows each of their paths works; "
                       f"left out there: {', '.join(left)}")
    return out


_PLANNED_ACCEL: dict[str, tuple[str, str]] = {}


def emulated(testbeds: Mapping[str, dict]) -> dict[str, str]:
    """{testbed: why} of the testbeds whose guests will be emulated (TCG), as far as the study's
    planning can know (hpcvirt.kvm.planned_accel, asked once per process)."""
    out = {}
    for name, tb in testbeds.items():
        if KINDS[tb["kind"]].may_be_emulated:
            setting = tb.get("vm", {}).get("accel", "auto")
            if setting not in _PLANNED_ACCEL:
                from .kvm import planned_accel
                _PLANNED_ACCEL[setting] = planned_accel(setting)
            accel, why = _PLANNED_ACCEL[setting]
            if accel == "tcg":
                out[name] = why
    return out


if __name__ == "__main__":   # python -m hpcvirt.config FILE...: study layers read as the workflow reads them
    import sys

    try:
        check_files(sys.argv[1:])
    except ConfigError as exc:
        sys.exit(str(exc))
