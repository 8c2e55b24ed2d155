"""Safe YAML loading through libyaml's parser where PyYAML has it.

The C parser reads the study and its testbeds about ten times faster than
the pure-Python one (0.2 s against 0.02 s here), which every measurement job
pays once; it builds the same plain objects (the safe loader's tags only).

What a YAML parser accepts but a configuration must not be is refused
before any value is built (:class:`Refused`, naming the key): a key given
twice in one mapping (YAML keeps the last one silently), a file larger
than :data:`MAX_FILE_BYTES` or not UTF-8, a single value longer than
:data:`MAX_VALUE_CHARS`, nesting deeper than :data:`MAX_DEPTH`, and
aliases that expand to more than :data:`MAX_NODES` values (an "alias
bomb": a few lines that would build billions).
"""

from __future__ import annotations

import os
from typing import IO, Any

import yaml

#: libyaml's safe loader, or PyYAML's own where it was built without libyaml
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: the largest YAML file read (the largest shipped one has 27 kB)
MAX_FILE_BYTES = 1 << 20
#: the longest single value (key or scalar), in characters
MAX_VALUE_CHARS = 64 << 10
#: the most values (mapping keys and values, list items) a document may expand to
MAX_NODES = 100_000
#: the deepest nesting of mappings and lists
MAX_DEPTH = 64

_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"


class Refused(yaml.YAMLError):
    """A YAML input refused before it is built; the message names the key."""


def _where(path: str) -> str:
    return path or "(top level)"


def _check(root: yaml.Node) -> None:
    """Refuse duplicate keys, long values, deep nesting and alias bombs in a
    composed document.  Every node is visited once (an alias is the node it
    names), so this is linear in the file however far its aliases expand."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, path: str, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > MAX_DEPTH:
            raise Refused(f"{_where(path)}: nested deeper than {MAX_DEPTH} levels (line {node.start_mark.line + 1})")
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_VALUE_CHARS:
                raise Refused(f"{_where(path)}: a value of {len(node.value)} characters (at most {MAX_VALUE_CHARS}; "
                              f"line {node.start_mark.line + 1})")
            n = 1
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node.value))
        else:
            n, seen = 1, {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "(complex key)"
                sub = f"{path}.{name}" if path else str(name)
                n += size(key, sub, depth + 1)
                if not isinstance(key, yaml.ScalarNode) or key.tag not in (_STR, _MERGE):
                    # yes:, 1:, ~: are a bool, an int, a null: no key a schema's names can check
                    raise Refused(f"{sub}: a key that is not a string (line {key.start_mark.line + 1}); quote it")
                if key.tag != _MERGE:
                    if (key.tag, key.value) in seen:
                        raise Refused(f"{sub}: duplicate key at line {key.start_mark.line + 1} (first at line "
                                      f"{seen[key.tag, key.value]}): YAML would keep only the last one")
                    seen[key.tag, key.value] = key.start_mark.line + 1
                n += size(value, sub, depth + 1)
        if n > MAX_NODES:
            raise Refused(f"{_where(path)}: expands to more than {MAX_NODES} values through its aliases "
                          f"(line {node.start_mark.line + 1})")
        sizes[id(node)] = n
        return n

    size(root, "", 0)


def _check_depth(stream: str | bytes) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` from the parser's events,
    before libyaml's composer, which recurses once per level (a file of
    200,000 ``[`` crashes the interpreter there)."""
    loader, depth = LOADER(stream), 0
    try:
        while (event := loader.get_event()) is not None:
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise Refused(f"nested deeper than {MAX_DEPTH} levels (line {event.start_mark.line + 1})")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    finally:
        loader.dispose()


def safe_load(stream: str | bytes | IO) -> Any:
    """``yaml.safe_load`` with :data:`LOADER`, refusing what :func:`_check`
    refuses; raises ``yaml.YAMLError`` (:class:`Refused` for those)."""
    if not isinstance(stream, (str, bytes)):
        stream = stream.read(MAX_FILE_BYTES + 1)
    if len(stream) > MAX_FILE_BYTES:
        raise Refused(f"larger than the {MAX_FILE_BYTES} {'characters' if isinstance(stream, str) else 'bytes'} "
                      "a YAML input may have")
    _check_depth(stream)
    loader = LOADER(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_file(path: str | os.PathLike) -> Any:
    """The YAML file ``path``: at most :data:`MAX_FILE_BYTES`, UTF-8, checked
    as :func:`safe_load` does.  A refusal is a :class:`Refused`, a syntax
    error a ``yaml.YAMLError`` and a file that cannot be read an ``OSError``;
    their messages do not name the file (the caller does)."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise Refused(f"larger than the {MAX_FILE_BYTES} bytes a YAML file may have")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Refused(f"not UTF-8 (byte {data[exc.start]:#04x} at line {line})") from None
    return safe_load(text)

