"""Every configuration key is documented in config/README.md, under its exact
name; the parts generated from the benchmark declarations are up to date."""

import re
from pathlib import Path

from hpcvirt import docs
from hpcvirt.config import load_schema

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "config/README.md").read_text()


def keys(schema: dict, prefix: str = "") -> list[str]:
    """Dotted key paths of a schema; free-form mapping keys become <*>."""
    out = []
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append(path)
        if isinstance(sub, dict):
            out += keys(sub, path)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and ("properties" in extra or "additionalProperties" in extra):
        out += [f"{prefix}.<*>", *keys(extra, f"{prefix}.<*>")]
    return out


def leaves(schema: dict) -> list[str]:
    ks = keys(schema)
    return [k for k in ks if not any(other.startswith(k + ".") for other in ks)]


def documented() -> set[str]:
    """The backticked keys in the first cell of every table row, <...> normalised."""
    out = set()
    for line in DOC.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ")[0]
            for k in re.findall(r"`([^`]+)`", first):
                out.add(re.sub(r"<[^>]*>", "<*>", k.replace("\\|", "|")))
    return out


def test_generated_parts_are_up_to_date():
    assert docs.main(["--check"]) == 0, "config/README.md is out of date: run python -m hpcvirt.docs"


def test_study_keys_documented():
    # the keys of experiments.<e>.by_kind.<kind> and .by_testbed.<testbed> are those of experiments.<e>,
    # documented once
    missing = [k for k in leaves(load_schema("config.schema.yaml"))
               if k not in documented()
               and re.sub(r"(\.by_(?:kind|testbed)\.[^.]+)\..*", r"\1", k) not in documented()]
    assert not missing, f"undocumented keys in config/README.md: {missing}"


def test_testbed_keys_documented():
    missing = [k for k in leaves(load_schema("testbed.schema.yaml")) if k not in documented()]
    assert not missing, f"undocumented testbed keys in config/README.md: {missing}"


def test_documented_keys_exist():
    """No stale documentation: every documented key is a key of a schema."""
    known = set(keys(load_schema("config.schema.yaml"))) | set(keys(load_schema("testbed.schema.yaml")))
    stale = sorted(k for k in documented() if k not in known)
    assert not stale, f"config/README.md documents keys no schema has: {stale}"


def test_key_match_is_exact():
    """A key is documented only under its own name (no substring of another)."""
    assert "exe" not in documented() and "runtime.exe" in documented()
