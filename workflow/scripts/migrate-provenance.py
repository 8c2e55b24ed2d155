#!/usr/bin/env python3
"""Rewrite the archived provenance records as new ones are written: no
absolute path of the machine that measured, nothing of the process
environment (hpcvirt.provenance.portable).

Records written before that held the measuring clone's absolute paths
(``/tmp/fresh/workflow/scripts/netns-rsh``, ``/work/mk/.hpcvirt/guest/...``,
the build cache and the source mirror) and, for the container testbeds,
the ``USER`` the launch took from the process.  This script rewrites the
JSON records under ``data/raw/`` once, by the shape of each path (the
record does not say which directory was the clone):

* ``<dir>/.hpcvirt/suites/<rest>``  -> ``$HPCVIRT_BUILD_CACHE/<rest>``
* ``<dir>/.hpcvirt/<rest>``         -> ``$HPCVIRT_WORKDIR/<rest>``
* ``<dir>/workflow/<rest>``         -> ``workflow/<rest>`` (in the clone)
* a source's ``from`` that is a file of a mirror -> ``$HPCVIRT_SOURCE_MIRROR/<file>``
* ``USER`` of ``command.env`` (provenance) and ``wireup[].env`` (preflight) -> removed

where ``<dir>`` is an absolute directory under ``/work`` or ``/tmp``.  Raw
outputs (``*.out``) are never opened.  A record is rewritten in place
(atomically, its mode kept) only if it changes; a second run changes
nothing.  Any ``/work`` or ``/tmp`` path left afterwards stops the script
with the file and key.

    python workflow/scripts/migrate-provenance.py [--check] [data/raw]

``--check`` rewrites nothing and exits 1 if a record would change.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from hpcvirt.atomic import write_text  # noqa: E402
from hpcvirt.runtime import PROCESS_ENV  # noqa: E402

MACHINE = r"/(?:work|tmp)(?:/[^/\s\"'=:,]+)*?"
RULES = [
    ("build cache", re.compile(MACHINE + r"/\.hpcvirt/suites/"), "$HPCVIRT_BUILD_CACHE/"),
    ("work directory", re.compile(MACHINE + r"/\.hpcvirt/"), "$HPCVIRT_WORKDIR/"),
    ("clone", re.compile(MACHINE + r"/workflow/"), "workflow/"),
]
LEFT = re.compile(r"(^|[\s=:,])/(work|tmp)(/|$)")


def _dump(data) -> str:
    """As hpcvirt.atomic.write_json writes a record."""
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


def migrate(obj, key: str, counts: Counter):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            sub = f"{key}.{k}" if key else k
            if k in PROCESS_ENV and key in ("command.env", "wireup[].env"):
                counts[f"removed {sub}"] += 1
                continue
            if k == "from" and key.endswith("source") and isinstance(v, str) and v.startswith("/") \
                    and "/.hpcvirt/" not in v:
                counts["source mirror"] += 1
                out[k] = f"$HPCVIRT_SOURCE_MIRROR/{Path(v).name}"
                continue
            out[k] = migrate(v, sub, counts)
        return out
    if isinstance(obj, list):
        return [migrate(v, f"{key}[]", counts) for v in obj]
    if isinstance(obj, str):
        for name, pattern, repl in RULES:
            obj, n = pattern.subn(lambda _, r=repl: r, obj)
            counts[name] += n
        if LEFT.search(obj):
            raise SystemExit(f"migrate-provenance: {key}: {obj!r} is still a path of the measuring machine")
    return obj


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if a record would change")
    ap.add_argument("raw", nargs="?", default="data/raw")
    args = ap.parse_args(argv)
    counts, changed, files = Counter(), [], sorted(Path(args.raw).rglob("*.json"))
    for path in files:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        try:
            new = migrate(data, "", counts)
        except SystemExit as exc:
            raise SystemExit(f"{path}: {exc}") from None
        if new == data:
            continue
        if _dump(data) != text:
            raise SystemExit(f"{path}: not in the form hpcvirt.atomic.write_json writes; not rewritten")
        changed.append(path)
        if not args.check:
            mode = path.stat().st_mode & 0o7777
            write_text(path, _dump(new))
            os.chmod(path, mode)
    print(f"migrate-provenance: {len(files)} records, {len(changed)} "
          f"{'would change' if args.check else 'rewritten'}; "
          + ", ".join(f"{n} {what}" for what, n in sorted(counts.items()) if n))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
