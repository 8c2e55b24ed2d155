"""The pinned software stacks: spack-envs/<stack>/spack.yaml must agree with
the Apptainer definition containers/<stack>.def that embeds it.

Checked for every stack:
  * every root spec, dependency (^) and compiler (%) has one exact version
    (no range ``@4.1:``, no list ``@4.1.7,4.1.8``, no missing ``@``);
  * the spack.yaml embedded in the .def has the same specs, packages and
    concretizer settings, and the install tree / view containerize sets;
  * the .def's stages use the pinned base images, and its %labels equal the
    spack.yaml container labels;
  * every ``org.hpcvirt.pkg.<name>`` label equals the version pinned for that
    package, and the compiler label equals the pinned compiler.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / "spack-envs"
DEFS = ROOT / "containers"

# the stacks turned into images (a container section); the laptop stack (spack-envs/laptop) is tested in
# tests/test_spack.py
STACKS = sorted(p.parent.name for p in ENVS.glob("*/spack.yaml")
                if "container" in yaml.safe_load(p.read_text())["spack"])

# name@version, where version is a single exact version (optionally "=").
_SPEC_HEAD = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]*)(?:@(?P<version>\S+))?$")
_EXACT = re.compile(r"^=?[0-9][0-9A-Za-z_.+-]*$")


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


def parse_spec(spec: str) -> list[tuple[str, str, str | None]]:
    """Split a spec string into (role, name, version) nodes.

    role is "root", "dep" (``^name@v``) or "compiler" (``%name@v``).
    Variants (``+x``, ``~x``, ``key=value``) are skipped.
    """
    if not isinstance(spec, str):
        # e.g. an unquoted "pkg@1.2: ..." that YAML read as a mapping
        raise ValueError(f"spec is not a string: {spec!r}")
    nodes: list[tuple[str, str, str | None]] = []
    tokens = spec.split()
    if not tokens:
        raise ValueError("empty spec")
    for i, tok in enumerate(tokens):
        role = None
        body = tok
        if i == 0:
            role = "root"
        elif tok.startswith("^"):
            role, body = "dep", tok[1:]
        elif tok.startswith("%"):
            role, body = "compiler", tok[1:].lstrip("%")
        elif tok.startswith(("+", "~", "-")) or "=" in tok:
            continue  # variant
        else:
            raise ValueError(f"unexpected token {tok!r} in spec {spec!r}")
        m = _SPEC_HEAD.match(body)
        if not m:
            raise ValueError(f"cannot parse {tok!r} in spec {spec!r}")
        nodes.append((role, m.group("name"), m.group("version")))
    return nodes


def exact_version_errors(specs: list[str]) -> list[str]:
    errors = []
    for spec in specs:
        try:
            nodes = parse_spec(spec)
        except ValueError as exc:
            errors.append(str(exc))
            continue
        for role, name, version in nodes:
            if version is None:
                errors.append(f"{spec!r}: {role} {name} has no version")
            elif not _EXACT.match(version):
                errors.append(f"{spec!r}: {role} {name}@{version} is not one exact version")
    return errors


def pinned_versions(specs: list[str]) -> dict[str, str]:
    """name -> version over all nodes; conflicting pins are an error."""
    pins: dict[str, str] = {}
    for spec in specs:
        for _role, name, version in parse_spec(spec):
            if version is None:
                continue
            v = version.lstrip("=")
            if pins.setdefault(name, v) != v:
                raise ValueError(f"{name} pinned to both {pins[name]} and {v}")
    return pins


def parse_def(text: str) -> dict:
    """Pull the embedded spack.yaml, stage images and %labels out of a .def."""
    stages = re.findall(r"^Bootstrap:\s*(\S+)\s*\nFrom:\s*(\S+)\s*\nStage:\s*(\S+)", text, re.M)
    m = re.search(r"cat << EOF > spack\.yaml\n(.*?)\nEOF\n", text, re.S)
    if not m:
        raise ValueError("no embedded spack.yaml (cat << EOF > spack.yaml ... EOF) found")
    manifest = yaml.safe_load(m.group(1))
    labels: dict[str, str] = {}
    lm = re.search(r"^%labels\s*\n(.*?)(?=^%|\Z)", text, re.M | re.S)
    if lm:
        for line in lm.group(1).splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition(" ")
            labels[key] = value.strip()
    sections = re.findall(r"^%(\w+)", text, re.M)
    return {"stages": stages, "manifest": manifest, "labels": labels, "sections": sections}


def check_stack(spack_yaml: Path, def_file: Path) -> list[str]:
    """Every disagreement between a spack.yaml and its .def, as messages."""
    errors: list[str] = []
    env = yaml.safe_load(spack_yaml.read_text())["spack"]
    d = parse_def(def_file.read_text())
    emb = (d["manifest"] or {}).get("spack", {})
    container = env.get("container", {})

    specs = list(env.get("specs", []))
    emb_specs = list(emb.get("specs", []))
    errors += [f"spack.yaml: {e}" for e in exact_version_errors(specs)]
    errors += [f".def: {e}" for e in exact_version_errors(emb_specs)]

    try:
        pins = pinned_versions(specs)
        emb_pins = pinned_versions(emb_specs)
    except ValueError as exc:
        return errors + [str(exc)]

    for name in sorted(set(pins) | set(emb_pins)):
        a, b = pins.get(name), emb_pins.get(name)
        if a != b:
            errors.append(f"{name}: spack.yaml pins {a}, {def_file.name} pins {b}")
    if sorted(specs) != sorted(emb_specs):
        only_y = sorted(set(specs) - set(emb_specs))
        only_d = sorted(set(emb_specs) - set(specs))
        errors.append(f"spec lists differ: only in spack.yaml {only_y}, only in .def {only_d}")

    for key in ("packages", "concretizer"):
        if env.get(key) != emb.get(key):
            errors.append(f"'{key}' differs between spack.yaml and {def_file.name}")
    if emb.get("view") != "/opt/views/view":
        errors.append(f"embedded view is {emb.get('view')!r}, containerize uses /opt/views/view")
    if (emb.get("config") or {}).get("install_tree") not in ("/opt/software", {"root": "/opt/software"}):
        errors.append("embedded config:install_tree is not /opt/software")
    if env.get("concretizer", {}).get("unify") is not True:
        errors.append("concretizer:unify must be true")

    images = container.get("images", {})
    want = [images.get("build"), images.get("final")]
    got = [img for _b, img, _s in d["stages"]]
    if got != want:
        errors.append(f"stage images {got} != spack.yaml images {want}")
    if [s for _b, _i, s in d["stages"]] != ["build", "final"]:
        errors.append("the .def must have a build stage followed by a final stage")
    for section in ("post", "files", "environment", "runscript", "labels"):
        if section not in d["sections"]:
            errors.append(f"{def_file.name} has no %{section} section")

    labels = {k: str(v) for k, v in (container.get("labels") or {}).items()}
    for key in sorted(set(labels) | set(d["labels"])):
        if labels.get(key) != d["labels"].get(key):
            errors.append(f"label {key}: spack.yaml {labels.get(key)!r}, .def {d['labels'].get(key)!r}")
    for source, lab in (("spack.yaml", labels), (".def", d["labels"])):
        if lab.get("org.hpcvirt.stack") != spack_yaml.parent.name:
            errors.append(f"{source} label org.hpcvirt.stack is {lab.get('org.hpcvirt.stack')!r}, "
                          f"expected {spack_yaml.parent.name!r}")
        for key, value in lab.items():
            if key.startswith("org.hpcvirt.pkg."):
                pkg = key[len("org.hpcvirt.pkg."):]
                if pins.get(pkg) != value:
                    errors.append(f"{source} label {key}={value} but spack.yaml pins {pkg}@{pins.get(pkg)}")
        comp = lab.get("org.hpcvirt.compiler")
        if comp:
            cname, _, cver = comp.partition("@")
            if pins.get(cname) != cver:
                errors.append(f"{source} label org.hpcvirt.compiler={comp} but specs use {cname}@{pins.get(cname)}")
    return errors


# --------------------------------------------------------------------------
# The real stacks
# --------------------------------------------------------------------------


def test_stacks_exist():
    assert {"openmpi-ucx", "mpich"} <= set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_def_exists(stack):
    assert (DEFS / f"{stack}.def").is_file(), f"containers/{stack}.def missing"


@pytest.mark.parametrize("stack", STACKS)
def test_spack_yaml_and_def_agree(stack):
    errors = check_stack(ENVS / stack / "spack.yaml", DEFS / f"{stack}.def")
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("stack", STACKS)
def test_every_spec_has_exact_version(stack):
    env = yaml.safe_load((ENVS / stack / "spack.yaml").read_text())["spack"]
    assert env["specs"], "no specs"
    assert not exact_version_errors(env["specs"])
    # the required components are pinned
    pins = pinned_versions(env["specs"])
    for pkg in ("gcc", "pmix", "ucx", "rdma-core", "osu-micro-benchmarks",
                "intel-mpi-benchmarks", "npb", "hpcc"):
        assert pkg in pins, f"{stack}: {pkg} not pinned"
    assert ("openmpi" in pins) != ("mpich" in pins)


@pytest.mark.parametrize("stack", STACKS)
def test_container_section(stack):
    env = yaml.safe_load((ENVS / stack / "spack.yaml").read_text())["spack"]
    c = env["container"]
    assert c["format"] == "singularity"
    assert c["strip"] is True
    for img in (c["images"]["build"], c["images"]["final"]):
        tag = img.rsplit("/", 1)[-1]
        assert ":" in tag or "@sha256:" in img, f"{img} is not pinned"
        assert not tag.endswith((":latest", ":develop")), f"{img} floats"
    assert c["labels"]["org.hpcvirt.stack"] == stack


def test_stacks_share_common_pins():
    """Both stacks use one PMIx/UCX/rdma-core/compiler so results compare."""
    pins = {s: pinned_versions(yaml.safe_load((ENVS / s / "spack.yaml").read_text())["spack"]["specs"])
            for s in STACKS}
    for pkg in ("gcc", "pmix", "ucx", "rdma-core", "osu-micro-benchmarks", "npb", "hpcc"):
        assert len({p[pkg] for p in pins.values()}) == 1, pkg


# --------------------------------------------------------------------------
# The checker catches what it must (negative tests)
# --------------------------------------------------------------------------


@pytest.fixture
def stack_copy(tmp_path):
    stack = "openmpi-ucx"
    env_dir = tmp_path / "spack-envs" / stack
    env_dir.mkdir(parents=True)
    shutil.copy(ENVS / stack / "spack.yaml", env_dir / "spack.yaml")
    shutil.copy(DEFS / f"{stack}.def", tmp_path / f"{stack}.def")
    return env_dir / "spack.yaml", tmp_path / f"{stack}.def"


def test_copy_is_clean(stack_copy):
    assert check_stack(*stack_copy) == []


def test_detects_version_mismatch_in_def(stack_copy):
    y, d = stack_copy
    text = d.read_text()
    assert "  - openmpi@4.1.6 " in text
    d.write_text(text.replace("  - openmpi@4.1.6 ", "  - openmpi@4.1.5 ", 1))
    errors = check_stack(y, d)
    assert any("openmpi: spack.yaml pins 4.1.6" in e and "4.1.5" in e for e in errors), errors


def test_detects_version_mismatch_in_spack_yaml(stack_copy):
    y, d = stack_copy
    y.write_text(y.read_text().replace("ucx@1.14.1", "ucx@1.14.0"))
    errors = check_stack(y, d)
    assert any(e.startswith("ucx: spack.yaml pins 1.14.0") for e in errors), errors
    # the label still says 1.14.1, which no longer matches the spec
    assert any("org.hpcvirt.pkg.ucx=1.14.1" in e for e in errors), errors


def test_detects_label_mismatch(stack_copy):
    y, d = stack_copy
    d.write_text(d.read_text().replace("org.hpcvirt.pkg.pmix 4.2.6", "org.hpcvirt.pkg.pmix 4.2.2"))
    errors = check_stack(y, d)
    assert any("label org.hpcvirt.pkg.pmix" in e for e in errors), errors


def test_detects_base_image_drift(stack_copy):
    y, d = stack_copy
    d.write_text(d.read_text().replace("From: docker.io/library/ubuntu:22.04", "From: docker.io/library/ubuntu:latest"))
    assert any("stage images" in e for e in check_stack(y, d))


@pytest.mark.parametrize(
    "bad",
    [
        "openmpi@4.1: fabrics=ucx",      # range
        "openmpi@4.1.7,4.1.8",           # list
        "openmpi fabrics=ucx",           # missing version
        "hpcc@1.5.0 ^openblas",          # unpinned dependency
        "npb@3.4.1 %gcc",                # unpinned compiler
        "ucx@:1.18",                     # open range
    ],
)
def test_exact_version_rule(bad):
    assert exact_version_errors([bad])


@pytest.mark.parametrize("good", ["openmpi@4.1.8 fabrics=ucx,cma %gcc@13.3.0", "hpcc@=1.5.0 ^openblas@0.3.28"])
def test_exact_version_rule_accepts(good):
    assert exact_version_errors([good]) == []


def test_detects_range_inside_copy(stack_copy):
    y, d = stack_copy
    y.write_text(y.read_text().replace("npb@3.4.1 ", "npb@3.4:3.4.1 "))
    errors = check_stack(y, d)
    assert any("npb@3.4:3.4.1 is not one exact version" in e for e in errors), errors
