"""Every configuration key in the schemas is documented in config/README.md."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "config/README.md").read_text()


def keys(schema: dict, prefix: str = "") -> list[str]:
    out = []
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append(path)
        if isinstance(sub, dict) and "properties" in sub:
            out += keys(sub, path)
    return out


def test_study_keys_documented():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    # leaf keys must appear verbatim; sections are documented through their leaves
    leaves = [k for k in keys(schema) if not any(other.startswith(k + ".") for other in keys(schema))]
    missing = [k for k in leaves if f"`{k}`" not in DOC]
    assert not missing, f"undocumented keys in config/README.md: {missing}"


def test_testbed_keys_documented():
    schema = yaml.safe_load((ROOT / "workflow/schemas/testbed.schema.yaml").read_text())
    top = [k for k in keys(schema) if "." not in k]
    missing = [k for k in top if f"`{k}" not in DOC]
    assert not missing, f"undocumented testbed keys in config/README.md: {missing}"
    for section in ("runtime", "vm", "network", "slurm", "tcp"):
        for k in keys(schema["properties"][section], section):
            assert k.split(".")[1] in DOC, f"{k} is not documented"
