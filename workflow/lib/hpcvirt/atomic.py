"""Write files atomically: to a temporary name in the same directory, then
rename into place, so a reader never sees a half-written result."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Give the finished file ``tmp`` its final name ``path`` without ever
    replacing a file there (no-clobber: a hard link, then the temporary name
    is dropped).  Raises FileExistsError, leaving both files as they are."""
    os.link(tmp, path)
    os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def write_csv(path: str | os.PathLike, df, **to_csv) -> None:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, **to_csv)
