"""What one YAML text may cost once parsed: its nodes with aliases expanded, their text, and how deep it nests.

PyYAML shares the object an alias names, so a "billion laughs" file builds fast and small; the cost comes later,
in every walk that does not know about sharing (schema checks, hashing, JSON dumps). And libyaml's composer
recurses in C once per nesting level: some 30,000 nested collections overflow the C stack and kill the process.
So a text is measured before it is composed, and refused with the position of the node that goes over:

- ``plan`` proves most files safe without parsing: every node needs an indicator character (``[{-?:,``)
  or is the single root, so a text with few of them has few nodes and little depth; a text without both ``&`` and
  ``*`` has no aliases. Most files pass here.
- ``event_problem`` measures the rest exactly on libyaml's event stream (iterative, no recursion): it keeps the
  expanded size of every anchor, so an alias costs one addition, never a walk. It runs before the C composer,
  so deep nesting never reaches it.
- ``tree_problem`` measures a composed alias-free tree by levels, for the files ``cheap_bound`` let through with
  more indicators than ``MAX_DEPTH`` (depth is the one bound the count cannot prove for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import yaml

from ..errors import Problem

if TYPE_CHECKING:
    from ..settings import Settings

# Deeper YAML is refused. Deep enough for any schema a tool needs (each object level of a JSON Schema is two
# YAML levels); shallow enough that recursive walks further on (jsonschema, schema adaptation, JSON encoding)
# stay far from Python's recursion limit.
MAX_DEPTH = 100
# A text with more indicators than this is measured on events before the C composer sees it: that composer is
# safe to some 20,000 levels on an 8 MiB stack. Below it, files (about 125 typical tools) skip the event pass.
COMPOSE_SAFE = 5_000
INDICATORS = "[{-?:,"


@dataclass(frozen=True)
class YamlLimits:
    """What one definitions file may cost (the settings of the same names)."""

    max_file_bytes: int
    max_yaml_nodes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> YamlLimits:
        return cls(settings.max_file_bytes, settings.max_yaml_nodes)


@dataclass(frozen=True)
class Excess:
    """Where a text goes over a limit (0-based, as libyaml marks) and which limit."""

    line: int
    column: int
    message: str

    def problem(self, file: str) -> Problem:
        return Problem(file, self.line + 1, self.column + 1, self.message)


class Plan(NamedTuple):
    events: bool  # measure on events before composing
    tree: bool  # measure the composed tree (alias-free, shallow enough to compose)


def plan(text: str, limits: YamlLimits) -> Plan:
    """How ``text`` must be measured: not at all when the indicator count proves it small."""
    indicators = sum(map(text.count, INDICATORS))
    # Each indicator brings at most a collection, a key and a value; one more node for the root.
    if indicators > COMPOSE_SAFE or 3 * indicators + 1 > limits.max_yaml_nodes or ("&" in text and "*" in text):
        return Plan(events=True, tree=False)
    return Plan(events=False, tree=indicators > MAX_DEPTH)


def event_problem(loader: yaml.CSafeLoader, limits: YamlLimits) -> Excess | None:
    """Read every event of ``loader`` and return where the text first goes over a limit, or None.

    A syntax error ends the measurement without an excess: parsing again reports it, and reaches no further.
    """
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, characters) of its node, aliases expanded
    frames: list[list] = []  # open collections: [nodes, characters, anchor]
    open_anchors: set[str] = set()
    nodes = chars = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            mark = event.start_mark
            if kind is yaml.ScalarEvent:
                size = (1, len(event.value))
                if event.anchor is not None:
                    anchors[event.anchor] = size
            elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                if len(frames) >= MAX_DEPTH:
                    return Excess(mark.line, mark.column, f"nested deeper than {MAX_DEPTH} levels")
                frames.append([1, 0, event.anchor])
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                nodes += 1
                excess = _over(nodes, chars, limits, event)
                if excess is not None:
                    return excess
                continue
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                size_nodes, size_chars, anchor = frames.pop()
                size = (size_nodes, size_chars)
                if anchor is not None:
                    anchors[anchor] = size
                    open_anchors.discard(anchor)
                if frames:
                    frames[-1][0] += size_nodes
                    frames[-1][1] += size_chars
                continue  # already in the totals, node by node
            elif kind is yaml.AliasEvent:
                if event.anchor in open_anchors:
                    return Excess(mark.line, mark.column,
                                  f"alias '*{event.anchor}' is inside the node it names (a recursive alias)")
                size = anchors.get(event.anchor, (1, 0))  # an undefined alias: the composer reports it
            elif kind is yaml.StreamEndEvent:
                return None
            else:
                continue
            nodes += size[0]
            chars += size[1]
            if frames:
                frames[-1][0] += size[0]
                frames[-1][1] += size[1]
            excess = _over(nodes, chars, limits, event)
            if excess is not None:
                return excess
    except yaml.YAMLError:
        return None


def _over(nodes: int, chars: int, limits: YamlLimits, event: yaml.Event) -> Excess | None:
    mark = event.start_mark
    alias = f"alias '*{event.anchor}'" if type(event) is yaml.AliasEvent else None
    if nodes > limits.max_yaml_nodes:
        message = (f"{alias} expands the file past {limits.max_yaml_nodes:,} nodes" if alias else
                   f"the file goes past {limits.max_yaml_nodes:,} nodes here")
        return Excess(mark.line, mark.column, f"{message} (max_yaml_nodes)")
    if chars > limits.max_file_bytes:  # only an alias can: without one, the text is at most the file
        return Excess(mark.line, mark.column, f"{alias} expands the file past {limits.max_file_bytes:,} characters "
                                              "of text (max_file_bytes)")
    return None


def tree_problem(root: yaml.Node, limits: YamlLimits) -> Excess | None:
    """Where an alias-free composed tree nests deeper than ``MAX_DEPTH`` or goes past the node budget, or None.

    Level by level: one list per level and no recursion, about a twentieth of the time parsing took.
    """
    level = [root]
    depth, nodes = 0, 1
    mapping, scalar = yaml.MappingNode, yaml.ScalarNode
    while level:
        depth += 1  # the collections of this level are nested ``depth`` deep
        if depth > MAX_DEPTH:
            deep = next((node for node in level if type(node) is not scalar), None)
            if deep is not None:
                return Excess(deep.start_mark.line, deep.start_mark.column, f"nested deeper than {MAX_DEPTH} levels")
        below: list[yaml.Node] = []
        extend = below.extend
        for node in level:
            if type(node) is not scalar:
                if type(node) is mapping:
                    for pair in node.value:
                        extend(pair)
                else:
                    extend(node.value)
        nodes += len(below)
        if nodes > limits.max_yaml_nodes:
            mark = below[0].start_mark
            return Excess(mark.line, mark.column, f"the file goes past {limits.max_yaml_nodes:,} nodes here "
                                                  "(max_yaml_nodes)")
        level = below
    return None
