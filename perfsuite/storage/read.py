"""The one door files come in through: bytes from a regular file of bounded size, parsed strictly.

Every JSON and YAML document perfsuite reads passes here first, then its schema
(perfsuite.core.documents). What this layer refuses, each with the file's name:
- anything but a regular file (a FIFO named `x.json` would block a reader forever; a device
  would never end), opened without blocking so even the check cannot hang;
- a file larger than MAX_FILE_BYTES;
- JSON with a duplicated key (the second `samples_s` would silently win) or an integer of more
  than MAX_INT_DIGITS digits (Python refuses 4300 digits with a ValueError of its own);
- YAML with a duplicated key, more than MAX_YAML_ALIASES aliases (an alias bomb expands to
  billions of nodes for whoever walks it), or a tag beyond the safe loader's.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.core.errors import ConfigError, RecordError

if TYPE_CHECKING:
    import yaml

MAX_FILE_BYTES = 64 * 2**20  # 100 records of 10,000 samples each are about 25 MB of JSON
MAX_INT_DIGITS = 30
MAX_YAML_ALIASES = 100
MAX_YAML_NODES = 100_000  # a suite file of hundreds of cases is a few thousand


class _Refused(ValueError):
    """Raised inside the JSON parser's hooks; turned into the caller's error with the file's name."""


def read_bytes(path: str | os.PathLike[str], error: type[Exception] = RecordError, limit: int | None = None) -> bytes:
    p = Path(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{p}: no such file") from None
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: not a regular file (a folder, FIFO or device); refusing to read it")
        if st.st_size > limit:
            raise error(f"{p}: {st.st_size} bytes, more than the {limit}-byte limit on a file perfsuite reads")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise error(f"{p}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        raise error(f"{p}: more than the {limit}-byte limit on a file perfsuite reads")
    return data


def read_text(path: str | os.PathLike[str], error: type[Exception] = RecordError, limit: int | None = None) -> str:
    data = read_bytes(path, error, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:60]!r} (a reader would silently keep one of the two)")
        out[key] = value
    return out


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def parse_json(text: str, where: str, error: type[Exception] = RecordError) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int)
    except _Refused as exc:
        raise error(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply") from None


def read_json(path: str | os.PathLike[str], error: type[Exception] = RecordError) -> Any:
    return parse_json(read_text(path, error), str(path), error)


def _yaml_loader() -> type[yaml.SafeLoader]:
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """The safe loader, refusing duplicate keys and counting aliases."""

        aliases = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML leaves it unannotated
                    raise yaml.MarkedYAMLError(None, None, f"more than {MAX_YAML_ALIASES} aliases", event.start_mark)
            return super().compose_node(parent, index)

        def construct_document(self, node: yaml.Node) -> Any:
            expanded = _expanded_nodes(node)
            if expanded > MAX_YAML_NODES:  # issue 51: 73 aliases, each naming the last ten times, ran out of memory
                raise yaml.MarkedYAMLError(
                    None,
                    None,
                    f"more than {MAX_YAML_NODES} nodes once its aliases are expanded (an alias bomb?)",
                    node.start_mark,
                )
            return super().construct_document(node)

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged by the base class,
                    continue  # and a key of the mapping's own may override what it merges
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                except TypeError:  # an unhashable key: the base class words that error
                    break
                if dup:
                    raise yaml.MarkedYAMLError(None, None, f"duplicate key {str(key)[:60]!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, StrictLoader.construct_mapping)
    return StrictLoader


def _expanded_nodes(root: Any) -> int:
    """How many nodes the document has once every alias is expanded: each node counted once per
    path to it, computed over the shared graph (an alias bomb is small as a graph, huge expanded),
    stopping past MAX_YAML_NODES."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = (
            [c for pair in node.value for c in pair]
            if isinstance(node.value, list) and node.value and isinstance(node.value[0], tuple)
            else node.value
            if isinstance(node.value, list)
            else []
        )
        if done:
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 1) for c in children), MAX_YAML_NODES + 1)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def read_yaml(path: str | os.PathLike[str], what: str = "file") -> Any:
    """A YAML document from a regular file; errors (ConfigError) say where in the file."""
    import yaml

    text = read_text(path, ConfigError)
    try:
        doc = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(f"{path}: malformed YAML at {at}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: malformed YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None
    if doc is None:
        raise ConfigError(f"{path}: the {what} is empty")
    return doc
