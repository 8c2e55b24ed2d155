"""Every declared benchmark is complete: a schema fragment, parser tests on
captured outputs that emit only its declared metrics and units, every
parameter documented, a raw path that encodes every parameter, and a dry run
that schedules it on each testbed kind that offers it."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from hpcvirt import matrix
from hpcvirt.benchmarks import MODULES, REGISTRY
from hpcvirt.benchmarks.base import Application
from hpcvirt.config import _apply_defaults, load_schema, load_study, load_testbed, offers
from hpcvirt.tidy import UNITS, ParseError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
TESTBEDS = {p.stem: load_testbed(p) for p in sorted((ROOT / "config/testbeds").glob("*.yaml"))}
NAMES = REGISTRY.names()


def test_registry_lists_every_module_once():
    """Each benchmark module is in MODULES, once, and its declaration's ``name`` is the module's name."""
    assert len(set(NAMES)) == len(NAMES), f"a name is declared twice: {NAMES}"
    for module, name in zip(MODULES, NAMES):
        assert module == name, f"benchmarks/{module}.py declares name {name!r}: a benchmark's name is its module's"
    declared = {p.stem for p in (ROOT / "workflow/lib/hpcvirt/benchmarks").glob("*.py")
                if p.stem not in ("__init__", "base", "common", "parts")}
    assert not declared - set(MODULES), f"not in MODULES (benchmarks/__init__.py): {sorted(declared - set(MODULES))}"
    assert not set(MODULES) - declared, f"in MODULES without a module: {sorted(set(MODULES) - declared)}"
    assert len({b.experiment for b in REGISTRY}) == len(NAMES)



def test_one_benchmark_declares_the_preflight_wire_up_and_its_settings_are_its_own():
    """The container preflight runs the one benchmark that declares ``wireup`` (hpcvirt.preflight); its
    settings are parameters of that benchmark, within their bounds (the schema of its experiment)."""
    declaring = [b for b in REGISTRY if b.wireup]
    assert len(declaring) == 1, [b.name for b in declaring]
    bench = declaring[0]
    assert bench.mpi and set(bench.wireup) <= set(bench.params)
    exp = {"enabled": True, "mpis": ["openmpi"], "paths": ["shm"], **bench.wireup}
    jsonschema.validate(exp, bench.schema())

@pytest.mark.parametrize("name", NAMES)
def test_schema_fragment(name):
    b = REGISTRY[name]
    frag = b.schema()
    jsonschema.Draft202012Validator.check_schema(frag)
    assert load_schema("config.schema.yaml")["properties"]["experiments"]["properties"][b.experiment] == frag
    inputs = ["inputs"] if isinstance(b, Application) else []      # input sets (applications)
    assert set(frag["properties"]) == {"enabled", "repetitions", "timeout_s", "retries_after_timeout", "skip_testbeds",
                                   "by_kind", "by_testbed", *b.params,
                                   *inputs}
    # a section with only its required keys is valid, and its defaults are valid too
    minimal = {k: _example(p) for k, p in b.params.items() if p.required}
    jsonschema.validate(minimal, frag)
    jsonschema.validate(_apply_defaults(copy.deepcopy(minimal), frag), frag)
    for unit in b.metrics.values():
        assert unit in UNITS, f"{name}: unit {unit!r} is not a tidy unit"
    assert b.success and b.title and b.build.describe()


def _example(p):
    return {"int": 8, "bool": True, "choice": p.choices[:1] and p.choices[0], "ints": [1],
            "choices": list(p.choices[:1])}[p.kind]


@pytest.mark.parametrize("name", NAMES)
def test_parser_on_captured_outputs(name):
    """Its fixtures: at least one accepted and one rejected output, and every
    accepted one gives only the metrics and units the declaration lists."""
    b = REGISTRY[name]
    assert (FIXTURES / name).is_dir(), (f"{name}: needs captured outputs of a good and of a failed run in "
                                        f"{FIXTURES / name}/ (unedited, with a README.md saying where each came from)")
    files = sorted(p for p in (FIXTURES / name).iterdir() if p.name != "README.md")
    accepted, rejected = [], []
    for f in files:
        try:
            rows = b.parse(f, {})
        except ParseError as exc:
            assert str(f) in str(exc), "a rejection must name the file"
            rejected.append(f)
            continue
        assert rows, f
        others = sorted({r.benchmark for r in rows if not b.owns(r.benchmark)})
        assert not others, (f"{f.name}: rows named {others} are not {name}'s (its name, row_name or row_prefix): "
                            "the figures, macros and counts would give them to another benchmark")
        bad = sorted({(r.metric, r.unit) for r in rows if not b.declares(r.metric, r.unit)})
        assert not bad, f"{f.name}: undeclared metrics/units {bad}"
        accepted.append(f)
    assert accepted and rejected, f"{name}: needs captured outputs of a good and of a failed run"
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_parsers_*.py"))
    assert re.search(rf"from hpcvirt\.benchmarks import [^\n]*\b{name}\b", tests), f"no parser test imports {name}"


def _documented() -> set[str]:
    doc = (ROOT / "config/README.md").read_text()
    return set(re.findall(r"^\| `([^`]+)`", doc, re.MULTILINE))


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_documented(name):
    b = REGISTRY[name]
    documented = _documented()

    def walk(prefix, params):
        for k, p in params.items():
            if p.kind == "group":
                yield from walk(f"{prefix}.{k}", p.fields)
            else:
                yield f"{prefix}.{k}"

    missing = [k for k in walk(f"experiments.{b.experiment}", b.all_params()) if k not in documented]
    assert not missing, f"undocumented in config/README.md: {missing}"
    entry = f"mpi.<mpi>.{name}" if b.mpi else name
    assert f"{entry}.binary" in documented


def _full_study() -> dict:
    """Every experiment on every shipped testbed that offers it."""
    study = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for b in REGISTRY:
        exp = study["experiments"].setdefault(b.experiment, {})
        exp.update({k: _example(p) if p.kind != "choices" else list(p.choices) for k, p in b.params.items()
                    if p.required and k not in exp})
        exp["enabled"] = True
        exp["skip_testbeds"] = []      # every testbed that offers it (an overlay of config.yaml)
    study["experiments"]["npb"].update(kernels=["cg"], ranks=[2])
    study["experiments"]["osu"].update(tests=["osu_latency", "osu_allreduce"])
    study["testbeds"] = ["local", "bridge", "vm", "example-site"]
    study["repetitions"] = 1
    study["campaign"] = "registry-dry"
    # every experiment in the guests too, also where they would be emulated
    study["emulated_guests"] = {"experiments": sorted({b.experiment for b in REGISTRY})}
    return study


@pytest.mark.parametrize("name", NAMES)
def test_raw_path_encodes_every_parameter(name):
    """Changing any parameter of a configuration changes its raw-output path."""
    b = REGISTRY[name]
    study, _ = load_study(_full_study(), testbed_dir=ROOT / "config/testbeds")
    exp = study["experiments"][b.experiment]
    base = b.configurations(exp, None)[0]
    for key, value in base.items():
        if key in ("repetitions", "timeout_s", "retries_after_timeout"):
            continue        # more repetitions add rep-<n> outputs, a time limit only ends a hung run: no change to a run
        changed = dict(base)
        if isinstance(value, bool):
            changed[key] = not value
        elif isinstance(value, int):
            changed[key] = value + 1
        elif isinstance(value, dict):
            changed[key] = {k: v + 1 for k, v in value.items()}
        else:
            others = [c for p in b.params.values() for c in p.choices if c != value]
            changed[key] = others[0] if others else value + "x"
        assert b.raw_params(changed) != b.raw_params(base), f"{name}: {key} is not in the raw path"


def test_dry_run_schedules_every_benchmark_on_every_kind_that_offers_it(tmp_path):
    study = _full_study()
    cfg = tmp_path / "all.yaml"
    cfg.write_text(yaml.safe_dump(study))
    cp = subprocess.run([str(ROOT / ".venv/bin/snakemake"), "--workflow-profile", "workflow/profiles/default", "-n",
                         "--configfile", str(cfg), "--", "data/results/registry-dry/summary.csv"],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    out = cp.stdout + cp.stderr
    loaded, _ = load_study(study, testbed_dir=ROOT / "config/testbeds")
    for b in REGISTRY:
        kinds = {tb["kind"] for name, tb in TESTBEDS.items() if name in study["testbeds"] and b.name in offers(tb)}
        assert kinds, f"no shipped testbed offers {b.name}"
        for kind in kinds:
            names = [n for n in study["testbeds"] if TESTBEDS[n]["kind"] == kind and b.name in offers(TESTBEDS[n])]
            planned = [p for p in matrix.all_raw_paths(loaded) if p.split("/")[3] in names and p.split("/")[4] == b.name]
            assert planned, (f"{b.name}: the full study plans no run on the {kind} testbeds {names} that offer it: "
                             "its experiment's choices (every value of a required one) select nothing they offer "
                             "(their mpi.<mpi>.paths and binaries)")
            for p in planned:
                assert p in out, f"dry run does not schedule {p} ({b.name} on a {kind} testbed)"


def test_an_experiment_can_have_its_own_time_limit():
    """experiments.<name>.timeout_s reaches every configuration (measure.py kills a run after it
    instead of the study's timeout_s); the schema bounds it; raw-output names do not change."""
    b = REGISTRY["netpipe"]
    study, _ = load_study()
    exp = study["experiments"][b.experiment]
    assert exp["timeout_s"] == 120             # the archived study gives NetPIPE 120 s
    confs = b.configurations(exp, None)
    assert confs and all(c["timeout_s"] == 120 for c in confs)
    assert "timeout_s" not in b.configurations({k: v for k, v in exp.items() if k != "timeout_s"}, None)[0]
    jsonschema.validate(exp, b.schema())
    with pytest.raises(jsonschema.ValidationError, match="5 is less than the minimum of 10"):
        jsonschema.validate({**exp, "timeout_s": 5}, b.schema())
    ping = [c for c in matrix.configurations(study) if c.benchmark == "netpipe"]
    assert ping and all(c.settings["timeout_s"] == 120 for c in ping)
    assert all(c.params == b.raw_params({k: v for k, v in c.settings.items() if k != "timeout_s"}) for c in ping)


def test_an_experiment_can_retry_a_run_killed_at_its_time_limit():
    """experiments.<name>.retries_after_timeout reaches every configuration; the schema bounds it;
    raw-output names do not change."""
    b = REGISTRY["netpipe"]
    study, _ = load_study()
    exp = study["experiments"][b.experiment]
    assert exp["retries_after_timeout"] == 1       # the archived study retries a hung NetPIPE once
    jsonschema.validate(exp, b.schema())
    for bad in (-1, 4):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**exp, "retries_after_timeout": bad}, b.schema())
    # NetPIPE's and IMB's MPICH runs have hung in MPI_Finalize after a complete sweep: both retry once
    ping = [c for c in matrix.configurations(study) if c.benchmark in ("netpipe", "imb")]
    assert {c.benchmark for c in ping} == {"netpipe", "imb"}
    assert all(c.settings["retries_after_timeout"] == 1 for c in ping)
    others = [c for c in matrix.configurations(study) if c.benchmark not in ("netpipe", "imb")]
    assert others and all("retries_after_timeout" not in c.settings for c in others)
