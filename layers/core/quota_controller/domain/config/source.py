"""Reading quota documents from text (YAML or JSON) with the line of every field.

PyYAML's safe loader silently keeps the last of two equal keys; a typo such as a second
`maxCapacity:` must never silently drop a setting, so duplicate keys are an error here.
Every field's line and column is kept so that problems can point into the file.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

import yaml
from msgspec import Struct, field
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from quota_controller.domain.config.problems import Path


class DocumentSyntaxError(ValueError):
    """The text is not a readable YAML/JSON document; `line`/`column` are 1-based.
    `repeated_key`: the text is YAML, but a mapping gives a key twice (refused here)."""

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        *,
        repeated_key: bool = False,
    ):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.repeated_key = repeated_key

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return f"line {self.line}, column {self.column}: {self.message}"


class SourceDocument(Struct):
    """A parsed document and where each field stands in the text (path -> (line, column))."""

    data: Any
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def position(self, path: Path) -> tuple[int, int] | None:
        """The line and column of the field at `path`, or of its nearest parent that exists."""
        probe = tuple(path)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get(())


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor`; flatten_mapping merges it
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, Hashable):
                    continue  # super() raises "found unhashable key" with its position
                if key in seen:
                    first = seen[key].start_mark.line + 1
                    raise DocumentSyntaxError(
                        f"key {key!r} appears twice in one mapping (first on line {first}); "
                        "the second would silently replace the first",
                        key_node.start_mark.line + 1,
                        key_node.start_mark.column + 1,
                        repeated_key=True,
                    )
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


# YAML 1.1 reads `010` as 8 (octal), `1:30` as 90 (base 60), `0x1f` and `1_000` as numbers:
# a limit written that way would silently mean another number. Only plain decimal integers are
# numbers here; the rest stay text, which the validator then refuses as "not a whole number".
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:int"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789")
)


def parse_text(text: str) -> SourceDocument:
    """Parse YAML or JSON text; raises DocumentSyntaxError with the line of the fault."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character such as NUL
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise DocumentSyntaxError(
            f"unacceptable character #x{exc.character:04x}", line, column
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return SourceDocument(None)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "not valid YAML"
        if exc.context:
            problem = f"{exc.context}, {problem}"
        if mark is None:
            raise DocumentSyntaxError(problem) from None
        raise DocumentSyntaxError(problem, mark.line + 1, mark.column + 1) from None
    except yaml.YAMLError as exc:
        raise DocumentSyntaxError(str(exc)) from None
    finally:
        loader.dispose()
    doc = SourceDocument(data)
    _record(node, (), doc.positions, set())
    return doc


def _record(node: Node, path: Path, out: dict[Path, tuple[int, int]], seen: set[int]) -> None:
    # An anchor's node is walked once, where it is defined: an alias (`*a`) points at it
    # again, and following every alias path would loop on a node that contains its own alias
    # and grow without bound on nested ones ("billion laughs"). Fields reached through an
    # alias are located at the alias's parent instead.
    if id(node) in seen:
        return
    seen.add(id(node))
    out.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode):
                child = (*path, str(key_node.value))
                # Point at the key: that is what a person looks for.
                out[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                _record(value_node, child, out, seen)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _record(item, (*path, index), out, seen)
