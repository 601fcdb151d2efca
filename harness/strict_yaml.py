"""YAML that means one thing: duplicate keys and YAML-1.1-only scalars are refused.

PyYAML reads YAML 1.1, where ``on``/``yes`` are bools, ``010`` is octal 8 and a
repeated key silently replaces the first. Map files and device profiles are read
with :func:`read_yaml`, which refuses each of those with the line and the fix.
"""

from __future__ import annotations

import re

import yaml

_YAML12_BOOLS = {"true", "True", "TRUE", "false", "False", "FALSE"}
_YAML12_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+")


class YamlError(ValueError):
    """A YAML document that cannot be read unambiguously.

    ``source`` names the file, ``location`` the line and column (or None),
    ``problem`` what is wrong and how to fix it.
    """

    def __init__(self, source: str, location: str | None, problem: str) -> None:
        self.source = source
        self.location = location
        self.problem = problem
        where = f"{source}: {location}" if location else source
        super().__init__(f"{where}: {problem}")


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys and scalars only YAML 1.1 reads as bool or int."""

    source = "<yaml>"

    def _refuse(self, node: yaml.Node, problem: str) -> YamlError:
        mark = node.start_mark
        return YamlError(self.source, f"line {mark.line + 1}, column {mark.column + 1}", problem)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        first_lines: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = first_lines.get(key)
            except TypeError:  # an unhashable key: the base class explains it
                continue
            if first is not None:
                raise self._refuse(
                    key_node,
                    f"key {key!r} appears twice in one mapping (first at line {first}); "
                    "a later one would silently replace it: merge or rename them",
                )
            first_lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_strict_bool(self, node: yaml.ScalarNode) -> bool:
        if node.value not in _YAML12_BOOLS:
            raise self._refuse(
                node,
                f"{node.value!r} is a bool only in YAML 1.1 (other tools read a string): "
                f"quote it ('{node.value}') for a string, or write true or false for a bool",
            )
        return self.construct_yaml_bool(node)

    def construct_strict_int(self, node: yaml.ScalarNode) -> int:
        number = self.construct_yaml_int(node)
        if not _YAML12_INT.fullmatch(node.value):
            raise self._refuse(
                node,
                f"{node.value!r} is the int {number} only in YAML 1.1 (octal, binary, "
                f"sexagesimal or with '_'); write {number} for the int, or quote it "
                f"('{node.value}') for a string",
            )
        return number


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _StrictLoader.construct_strict_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_strict_int)


def read_yaml(text: str, source: str) -> object:
    """The document in ``text``; :class:`YamlError` names ``source`` and the line."""
    loader = _StrictLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        location = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        problem = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlError(source, location, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(source, None, f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
