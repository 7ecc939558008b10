"""Following a local JSON pointer (``#/$defs/polyline``) into a schema, for the readers that only describe one
(argument errors, return-type renderings) and so treat a reference that leads nowhere as nothing to follow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOWHERE = object()
"""What ``follow`` answers for a reference that is not local or leads to no member."""


def follow(root: Any, ref: str) -> Any:
    """What ``ref`` (``#``, ``#/$defs/X``; ``~1`` is ``/``, ``~0`` is ``~``) points to in ``root``, or ``NOWHERE``."""
    if not ref.startswith("#"):
        return NOWHERE
    target = root
    for step in filter(None, ref[1:].split("/")):
        step = step.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and step in target:
            target = target[step]
        elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
            target = target[int(step)]
        else:
            return NOWHERE
    return target
