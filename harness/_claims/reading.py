"""Claim files read safely: regular files of the project only, bounded in size, parsed into YAML nodes that keep
their line numbers, with anything but plain data refused.

Only regular files inside the project are read, and at most ``MAX_FILE_BYTES`` of them; anything
else named ``*.yaml`` (a directory, a device, a pipe, a looping or outward symlink) is a problem of
that file (:class:`Unreadable`).

PyYAML's safe loader is the base; what it does not do, and claim files need, is here: duplicate keys
refused rather than silently merged, aliases refused without being expanded, tags other than the
plain ones and keys that do not read as text refused with the field that holds them, a float's
literal text kept (its printed precision is the tolerance), YAML 1.2's reading of ``1e-6`` as a
number, libyaml's parser where it accepts the file, and a bound on flow nesting before PyYAML's
Python parser (about a millisecond per level) is reached.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from pathlib import Path
from typing import Any

import yaml

from claims_harness._claims.expect import FloatLiteral
from claims_harness.errors import Unreadable, UnsafeYaml, visible

MAX_FILE_BYTES = 1 << 20


def display_name(path: Path, root: Path) -> str:
    """A claim file's name in problems and reports: its path from the root, escaped if the name is not text."""
    try:
        name = path.relative_to(root).as_posix()
    except ValueError:  # a claims directory that is not below the root
        name = path.as_posix()
    # A name that is not UTF-8 arrives with its bytes as lone surrogates; write them as \xNN.
    return visible(os.fsencode(name).decode("utf-8", "backslashreplace"))


_FILE_TYPES = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket"}
_NOT_A_FILE = "a claim file is a regular file of the project; remove or rename this entry"


def read_claim_file(path: Path, root: Path) -> bytes:
    """The bytes of the regular file at ``path``, inside ``root``, at most ``MAX_FILE_BYTES`` of them.

    Never blocks and never reads without end: a device (``/dev/zero``), a pipe or a directory is
    refused by its type, and the file is opened without blocking and checked again once open.

    Raises:
      Unreadable: saying what the entry is instead, and what to do.
    """
    try:
        path.name.encode("utf-8")  # a name that is not UTF-8 arrives with its bytes as lone surrogates
    except UnicodeEncodeError:
        raise Unreadable("the file name is not valid UTF-8", "rename the file to a UTF-8 name") from None
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Unreadable("a symlink that loops: following it never reaches a file", _NOT_A_FILE) from None
        if error.errno == errno.ENOENT and path.is_symlink():
            raise Unreadable(f"a symlink to nothing: its target '{visible(os.readlink(path))}' does not exist",
                              _NOT_A_FILE) from None
        raise Unreadable(f"cannot be read: {error.strerror}", "make it readable, or remove it") from None
    if not stat.S_ISREG(info.st_mode):
        raise Unreadable(f"not a regular file ({_FILE_TYPES.get(stat.S_IFMT(info.st_mode), 'a special file')})",
                          _NOT_A_FILE)
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(root):
        raise Unreadable(f"a symlink that leaves the project (to {visible(str(target))})",
                          "copy the file into the claims directory, or link to a file inside the project")
    if info.st_size > MAX_FILE_BYTES:
        raise Unreadable(f"file is {info.st_size} bytes; claim files are limited to {MAX_FILE_BYTES}",
                          "split the lesson's claims or move bulk data into a verifier")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise Unreadable(f"cannot be read: {error.strerror}", "make it readable, or remove it") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # replaced since it was looked at
            raise Unreadable("not a regular file", _NOT_A_FILE)
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"file is more than {MAX_FILE_BYTES} bytes; claim files are limited to {MAX_FILE_BYTES}",
                          "split the lesson's claims or move bulk data into a verifier")
    return data


MAP_TAG, SEQ_TAG = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def tag_note(node: yaml.Node | None) -> str:
    if node is None:
        return ""
    standard = node.tag.startswith("tag:yaml.org,2002:") and "python" not in node.tag
    return "" if standard else f" (the tag '{node.tag}' is not allowed)"


# Plain data: what the YAML core schema reads text, numbers, booleans, null, lists and mappings as.
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map"))
_WHY_NOT = {
    "tag:yaml.org,2002:binary": "bytes are not text; write the text itself",
    "tag:yaml.org,2002:set": "a set has no order, so it would read differently from run to run; write a list",
    "tag:yaml.org,2002:omap": "write a plain mapping",
    "tag:yaml.org,2002:pairs": "write a plain mapping",
    "tag:yaml.org,2002:timestamp": "YAML reads an unquoted date as a date; quote it to keep it text",
}
# The characters the YAML reader refuses in a file, refused too when an escape writes them ("\\udfff", "\\x1b").
_UNWRITABLE = yaml.reader.Reader.NON_PRINTABLE


def refuse_unsafe(node: yaml.Node, seen: set[int], loader: ClaimLoader) -> None:
    """Raise at the first node below ``node`` that is not plain data, or that was reached before.

    A node reached twice is shared through an alias: the composer shares aliased nodes instead
    of copying them, so an alias "bomb" costs nothing until something expands it; this walk never
    does, and stops at the first repeat. A tag other than the plain ones, a key that is not plain
    text and text the reader would refuse are refused with the node, so the problem names its field.
    """
    first, last = line_of(node), node.end_mark.line + 1
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            uses = loader.alias_lines.get(id(current), [])
            line = next((use for use in uses if first <= use <= last), uses[0] if uses else line_of(current))
            raise UnsafeYaml(f"an alias (*name) reuses the value anchored at line {line_of(current)}; aliases and "
                              "merge keys are not allowed in claim files: write the value out", line)
        seen.add(id(current))
        if current.tag not in _PLAIN_TAGS:
            raise UnsafeYaml(f"the tag '{visible(current.tag)}' is not allowed", line_of(current), current,
                              _WHY_NOT.get(current.tag))
        if isinstance(current, yaml.ScalarNode):
            unwritable = _UNWRITABLE.search(current.value)
            if unwritable:
                raise UnsafeYaml(f"the text holds {_character(unwritable.group())}; claim files hold printable text "
                                  "only", line_of(current), current, "remove it (an escape such as \\e or \\udfff in "
                                  "a double-quoted string writes it)")
        elif isinstance(current, yaml.MappingNode):
            for key, _ in current.value:
                refused = key_problem(key, loader)
                if refused:
                    raise UnsafeYaml(refused[0], line_of(key), key, refused[1])
            stack.extend(item for pair in reversed(current.value) for item in reversed(pair))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(reversed(current.value))


def key_problem(key: yaml.Node, loader: ClaimLoader) -> tuple[str, str] | None:
    """Why ``key`` cannot name a field, and the fix: a tag, or a plain scalar YAML reads as other than text."""
    if not isinstance(key, yaml.ScalarNode):
        return None  # refused when constructed: "mapping keys must be plain names"
    name = visible(key.value)
    if id(key) in loader.explicit_tags:
        return (f"the key '{name}' has a tag ('{visible(key.tag)}')", "keys are plain field names: remove the tag")
    if key.tag == "tag:yaml.org,2002:merge":
        return f"the key '{name}' is a merge key, which claim files do not allow", "write the keys out"
    if key.tag != "tag:yaml.org,2002:str":
        return (f"the key '{name}' reads as a {key.tag.rsplit(':', 1)[-1]}, not as a name",
                "keys are plain field names: quote it, or rename it")
    return None


def _character(character: str) -> str:
    code = ord(character)
    what = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a control character" if code < 0xA0 else \
        "a non-character"
    return f"U+{code:04X} ({what})"


class _Events:
    """The parser half of a loader, over the whole file's events read at once.

    libyaml (PyYAML's C extension, when installed) reads a claim file's events some twenty times
    faster than PyYAML's Python scanner, which was a third of a cold ``pytest claims -k ...``;
    composing nodes from the events stays in Python, where :class:`ClaimLoader` records what it
    needs. A file libyaml refuses is read again by the Python parser, whose messages name the
    problem as they always did, so only files that both accept are ever read from libyaml's events.
    """

    def __init__(self, stream: str):
        try:
            if not yaml.__with_libyaml__:
                raise yaml.YAMLError("libyaml is not installed")
            events = list(yaml.parse(stream, Loader=yaml.CSafeLoader))
        except yaml.YAMLError:
            # The Python parser takes about a millisecond per level of flow nesting: a file of a hundred
            # thousand brackets would take minutes. Deeper than any claim file needs is refused first.
            depth, line = _flow_depth(stream)
            if depth > MAX_FLOW_DEPTH:
                raise RecursionError(f"flow collections nested {depth} deep at line {line}") from None
            events = list(yaml.parse(stream, Loader=yaml.SafeLoader))
        self._events = deque(events)

    def check_event(self, *choices: type) -> bool:
        return bool(self._events) and (not choices or isinstance(self._events[0], choices))

    def peek_event(self) -> yaml.Event | None:
        return self._events[0] if self._events else None

    def get_event(self) -> yaml.Event:
        return self._events.popleft()

    def dispose(self) -> None:
        self._events.clear()


# Claim files nest a few levels ([..] in {..} in a check); a hundred is far beyond any and quick to refuse.
MAX_FLOW_DEPTH = 100


def _flow_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of flow brackets in ``text`` outside quotes and comments (an upper bound on YAML's
    flow nesting), and the line where it is first reached; stops counting past ``MAX_FLOW_DEPTH``."""
    depth = deepest = 0
    line = where = 1
    quote = None
    previous = "\n"
    for character in text:
        if character == "\n":
            line += 1
            if quote is None:
                previous = character
                continue
        if quote is not None:
            if character == quote:
                quote = None
        elif character in "'\"":
            quote = character
        elif character == "#" and previous in " \t\n":
            quote = "\n"  # a comment ends at the line's end
        elif character in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
                if deepest > MAX_FLOW_DEPTH:
                    break
        elif character in "]}":
            depth = max(depth - 1, 0)
        previous = character
    return deepest, where


class ClaimLoader(_Events, yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """A safe loader that refuses duplicate and non-scalar keys and keeps numeric literals' text.

    It also records the line of every alias, so that loading can say where one is used, and which
    nodes carry a tag written in the file (``!!str``), which a resolved tag does not tell.
    """

    def __init__(self, stream: str):
        _Events.__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.alias_lines: dict[int, list[int]] = {}
        self.explicit_tags: set[int] = set()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.anchors:
                self.alias_lines.setdefault(id(self.anchors[event.anchor]), []).append(event.start_mark.line + 1)
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        if event.tag not in (None, "!"):
            self.explicit_tags.add(id(node))
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise UnsafeYaml("mapping keys must be plain names, not lists or mappings", line_of(key_node), key_node)
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                raise UnsafeYaml(f"duplicate key '{key}' in one mapping", line_of(key_node), key_node)
            keys.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        return FloatLiteral(super().construct_yaml_float(node), node.value)

    def construct_undefined(self, node: yaml.Node) -> Any:
        raise UnsafeYaml(f"the tag '{node.tag}' is not allowed", line_of(node), node)


ClaimLoader.add_constructor("tag:yaml.org,2002:float", ClaimLoader.construct_yaml_float)
ClaimLoader.add_constructor(None, ClaimLoader.construct_undefined)
# YAML 1.2 reads 1e-6 as a number; PyYAML's YAML 1.1 rules would read it as a string.
ClaimLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def construct(node_or_pairs: yaml.Node | dict[str, yaml.Node]) -> Any:
    loader = ClaimLoader("")
    try:
        if isinstance(node_or_pairs, dict):
            return {key: loader.construct_object(value, deep=True) for key, value in node_or_pairs.items()}
        return loader.construct_object(node_or_pairs, deep=True)
    except yaml.constructor.ConstructorError as error:
        mark = error.problem_mark
        raise UnsafeYaml(str(error.problem), mark.line + 1 if mark else None) from None
    except (ValueError, RecursionError) as error:  # e.g. an integer literal of thousands of digits
        raise UnsafeYaml(f"a value cannot be read: {str(error)[:200]}", line_of(node_or_pairs)
                          if isinstance(node_or_pairs, yaml.Node) else None) from None
    finally:
        loader.dispose()


def pairs(node: yaml.Node) -> list[tuple[str, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        return []
    return [(key.value, value) for key, value in node.value if isinstance(key, yaml.ScalarNode)]


def path_to(node: yaml.Node, target: yaml.Node) -> list[Any]:
    """The keys and indices that lead from ``node`` to ``target`` (a value or a key), or [] if absent."""
    stack: list[tuple[yaml.Node, list[Any]]] = [(node, [])]
    while stack:
        current, path = stack.pop()
        if current is target:
            return path
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if key is target:
                    return [*path, name]
                stack.append((value, [*path, name]))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, [*path, index]) for index, item in enumerate(current.value))
    return []


def node_at(node: yaml.Node, loc: list[Any]) -> yaml.Node:
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = dict(pairs(node)).get(str(part))
            if found is None:
                keys = [key for key, _ in node.value if isinstance(key, yaml.ScalarNode) and key.value == str(part)]
                return keys[0] if keys else node
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1
