"""YAML that means one thing, read within bounds.

PyYAML reads YAML 1.1, where ``on``/``yes`` are bools, ``010`` is octal 8, ``<<``
merges mappings and a repeated key silently replaces the first; YAML 1.2 readers
(most other tools) read ``1e3`` and ``0o17`` as numbers where PyYAML reads strings.
Map files and device profiles are read with :func:`read_yaml`, which refuses each
of those with the line and the fix, and keeps an untrusted document bounded: at most
:data:`MAX_DEPTH` levels of nesting, :data:`MAX_VALUES` values once aliases are
expanded (so an "alias bomb" is refused before it is built), numbers of at most
:data:`MAX_NUMBER_CHARS` characters, no control characters.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

import yaml

from harness.untrusted.reading import InputFileError, brief

MAX_DEPTH = 64  # nesting of mappings and lists; profiles and maps need 5
MAX_VALUES = 10_000  # values, each alias counted as what it stands for; a map has <= ~3600
MAX_NUMBER_CHARS = 32  # an int64 takes 20

_YAML12_BOOLS = {"true", "True", "TRUE", "false", "False", "FALSE"}
_YAML12_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+")
_YAML12_ONLY_INT = re.compile(r"0o(?P<octal>[0-7]+)|[-+]?[0-9]+")  # 0o17, 09 (str in YAML 1.1)
_YAML12_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML12_ONLY_TAG = "tag:et-harness,2026:yaml-1.2-number"  # plain scalars read as str here only
_CLIP_CHARS = 160  # PyYAML's own problem text can quote a token of any length


class YamlError(InputFileError):
    """A YAML document that cannot be read unambiguously or within bounds.

    ``source`` names the file, ``location`` the line and column (or None),
    ``problem`` what is wrong and how to fix it.
    """


class _Mark(Protocol):
    line: int
    column: int


def _at(mark: _Mark | None) -> str | None:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CLIP_CHARS else text[:_CLIP_CHARS] + "..."


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses what YAML 1.1 and 1.2 read differently, and unbounded input."""

    source = "<yaml>"

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0  # collections open around the node being composed
        self._values = 0  # values composed so far, aliases counted expanded
        self._open_anchors: set[str] = set()  # anchors of the collections being composed
        self._sizes: dict[int, int] = {}  # id(node) -> its expanded size

    def _refuse(self, node: yaml.Node, problem: str) -> YamlError:
        return YamlError(self.source, _at(node.start_mark), problem)

    # ---- composing: the node graph, with its depth and expanded size bounded ----------

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise YamlError(
                    self.source,
                    _at(event.start_mark),
                    f"the alias {brief('*' + event.anchor)} is inside the value it names, "
                    "which would have no end: write the value out instead",
                )
            node = super().compose_node(parent, index)
            assert node is not None  # an alias names a node, or composing raised
            self._count(self._expanded_size(node), event)
            return node
        if self._depth >= MAX_DEPTH:
            raise YamlError(
                self.source,
                _at(event.start_mark),
                f"nested deeper than the limit of {MAX_DEPTH} levels (a profile or map file "
                "needs about 5): remove the extra brackets or indentation",
            )
        self._count(1, event)
        self._depth += 1
        if event.anchor is not None:
            self._open_anchors.add(event.anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open_anchors.discard(event.anchor)

    def _count(self, values: int, event: yaml.Event) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise YamlError(
                self.source,
                _at(event.start_mark),
                f"more than {MAX_VALUES} values, counting each alias (*name) as the values "
                f"it stands for (limit {MAX_VALUES}, about three times what the largest valid "
                "map needs): write fewer values, or use fewer aliases",
            )

    def _expanded_size(self, root: yaml.Node) -> int:
        """The values in ``root`` with every alias expanded, capped at MAX_VALUES + 1;
        linear in the distinct nodes over all calls (``root`` is complete and acyclic)."""
        sizes = self._sizes
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if id(node) in sizes:
                continue
            children = _children(node)
            if children_done:
                sizes[id(node)] = min(MAX_VALUES + 1, 1 + sum(sizes[id(c)] for c in children))
            else:
                stack.append((node, True))
                stack.extend((child, False) for child in children if id(child) not in sizes)
        return sizes[id(root)]

    def resolve(self, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
        tag: str = super().resolve(kind, value, implicit)
        if (
            kind is yaml.ScalarNode
            and implicit[0]
            and tag == _STR_TAG
            and (_YAML12_FLOAT.fullmatch(value) or _YAML12_ONLY_INT.fullmatch(value))
        ):
            return _YAML12_ONLY_TAG
        return tag

    # ---- constructing: values, refused where YAML 1.1 and 1.2 disagree -----------------

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        if not isinstance(node, yaml.MappingNode):  # !!map or !!set on another node
            return super().construct_mapping(node, deep)  # which says what it expected
        first_lines: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise self._refuse(
                    key_node,
                    "'<<' merge keys exist only in YAML 1.1 (YAML 1.2 reads a key named '<<'): "
                    "write the keys out, or quote it ('<<') for a key named <<",
                )
            key = self.construct_object(key_node, deep=True)
            try:
                first = first_lines.get(key)
            except TypeError:  # an unhashable key: the base class explains it
                continue
            if first is not None:
                raise self._refuse(
                    key_node,
                    f"key {brief(key)} appears twice in one mapping (first at line {first}); "
                    "a later one would silently replace it: merge or rename them",
                )
            first_lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_strict_bool(self, node: yaml.ScalarNode) -> bool:
        if not isinstance(node, yaml.ScalarNode):  # !!bool on a collection
            return self.construct_yaml_bool(node)  # which says what it expected
        if node.value.lower() not in self.bool_values:  # only a tag (!!bool) brings it here
            raise self._tagged(node, "bool")
        if node.value not in _YAML12_BOOLS:
            raise self._refuse(
                node,
                f"{node.value!r} is a bool only in YAML 1.1 (other tools read a string): "
                f"quote it ('{node.value}') for a string, or write true or false for a bool",
            )
        return self.construct_yaml_bool(node)

    def _check_number_length(self, node: yaml.ScalarNode) -> None:
        if len(node.value) > MAX_NUMBER_CHARS:
            raise self._refuse(
                node,
                f"the number {brief(node.value)} is {len(node.value)} characters long, limit "
                f"{MAX_NUMBER_CHARS}: no field takes a number that large; quote it for a string",
            )

    def _tagged(self, node: yaml.ScalarNode, kind: str) -> YamlError:
        """The error for an explicitly tagged scalar (``!!int "x"``) that is no ``kind``."""
        return self._refuse(
            node,
            f"{brief(node.value)} is tagged {node.tag.rpartition(':')[2]!r} but is no {kind}: "
            "write the value without the tag",
        )

    def construct_strict_int(self, node: yaml.ScalarNode) -> int:
        self._check_number_length(node)
        try:
            number = self.construct_yaml_int(node)
        except (ValueError, IndexError):  # only a tag (!!int) brings a non-number here
            raise self._tagged(node, "int") from None
        if not _YAML12_INT.fullmatch(node.value):
            raise self._refuse(
                node,
                f"{node.value!r} is the int {number} only in YAML 1.1 (octal, binary, "
                f"sexagesimal or with '_'); write {number} for the int, or quote it "
                f"('{node.value}') for a string",
            )
        return number

    def construct_checked_float(self, node: yaml.ScalarNode) -> float:
        self._check_number_length(node)
        try:
            return self.construct_yaml_float(node)
        except (ValueError, IndexError):  # only a tag (!!float) brings a non-number here
            raise self._tagged(node, "float") from None

    def construct_yaml12_number(self, node: yaml.ScalarNode) -> str:
        self._check_number_length(node)
        as_int = _YAML12_ONLY_INT.fullmatch(node.value)
        if as_int:
            octal = as_int["octal"]
            kind = "int"
            fix = f"write {int(octal, 8) if octal else int(node.value)} for the int"
        else:
            value = float(node.value)
            kind = "float"
            fix = f"write {_yaml11_float(value)} for the float"
            if value.is_integer():  # map files take no floats: give the int spelling too
                fix += f" ({int(value)} for an int)"
        raise self._refuse(
            node,
            f"{node.value!r} is {'an' if kind == 'int' else 'a'} {kind} only in YAML 1.2 (a "
            f"string in YAML 1.1, which the harness reads): {fix}, "
            f"or quote it ('{node.value}') for a string",
        )

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> object:
        try:
            return self.construct_yaml_timestamp(node)
        except AttributeError:  # only a tag (!!timestamp) brings a non-date here
            raise self._tagged(node, "date or time") from None
        except (ValueError, OverflowError) as exc:
            raise self._refuse(
                node,
                f"{brief(node.value)} is read as a date or time, but not a valid one ({exc}): "
                "quote it for a string",
            ) from None


def _yaml11_float(number: float) -> str:
    """``number`` spelled so that YAML 1.1 and 1.2 both read that float."""
    if math.isnan(number):
        return ".nan"
    if math.isinf(number):
        return "-.inf" if number < 0 else ".inf"
    mantissa, _, exponent = repr(number).partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent and exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _StrictLoader.construct_strict_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_strict_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_checked_float)
_StrictLoader.add_constructor(
    "tag:yaml.org,2002:timestamp", _StrictLoader.construct_checked_timestamp
)
_StrictLoader.add_constructor(_YAML12_ONLY_TAG, _StrictLoader.construct_yaml12_number)


def read_yaml(text: str, source: str) -> object:
    """The document in ``text``; :class:`YamlError` names ``source`` and the line."""
    try:
        loader = _StrictLoader(text)  # refuses control characters at once
    except yaml.reader.ReaderError as exc:
        raise _unprintable(text, exc, source) from None
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        problem = ", ".join(part for part in (exc.context, exc.problem) if part)
        location = _at(exc.problem_mark)
        raise YamlError(source, location, f"not valid YAML: {_clip(problem)}") from None
    except yaml.YAMLError as exc:
        raise YamlError(source, None, f"not valid YAML: {_clip(str(exc))}") from None
    finally:
        loader.dispose()


def _unprintable(text: str, exc: yaml.reader.ReaderError, source: str) -> YamlError:
    line = text.count("\n", 0, exc.position) + 1
    column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    escape = f"\\x{code:02X}" if code < 0x100 else f"\\u{code:04X}"
    kind = "a control character" if code < 0xA0 else "not a printable character"
    return YamlError(
        source,
        f"line {line}, column {column}",
        f"character U+{code:04X} ({kind}) is not allowed in YAML; remove it, "
        f'or write the escape "{escape}" inside a double-quoted string',
    )
