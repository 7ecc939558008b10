"""The Semantic Kernel lights plugin: a small in-memory home, one state per gateway process."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from enum import Enum
from typing import Annotated


class Brightness(Enum):
    """How bright a light shines."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


# Both tools return this type, so the gateway derives their output schemas from it (the YAML declares none): the
# docstrings below become its descriptions, results are checked against it, and MCP clients get it as
# outputSchema and structuredContent.
@dataclass(frozen=True)
class LightModel:
    """A light and its current state."""

    id: int
    """The light's id, for change_state."""
    name: str
    """What people call the light."""
    is_on: bool
    brightness: Brightness
    color: Annotated[str, "Hex color #RRGGBB.", {"pattern": "^#[0-9A-Fa-f]{6}$"}]


_lock = threading.Lock()
_lights: dict[int, LightModel] = {
    1: LightModel(1, "Table Lamp", False, Brightness.MEDIUM, "#FFFFFF"),
    2: LightModel(2, "Porch light", False, Brightness.HIGH, "#FF0000"),
    3: LightModel(3, "Chandelier", True, Brightness.LOW, "#FFFF00"),
}


def get_lights() -> list[LightModel]:
    with _lock:
        return list(_lights.values())


def change_state(
    id: Annotated[int, "The id of the light to change."],
    is_on: Annotated[bool | None, "Turn the light on (true) or off (false)."] = None,
    brightness: Annotated[Brightness | None, "New brightness."] = None,
    color: Annotated[str | None, "New color as hex #RRGGBB.", {"pattern": "^#[0-9A-Fa-f]{6}$"}] = None,
) -> LightModel:
    from gateway import ToolError

    with _lock:
        light = _lights.get(id)
        if light is None:
            raise ToolError(f"No light with id {id}; known ids: {sorted(_lights)}.")
        changes = {k: v for k, v in {"is_on": is_on, "brightness": brightness, "color": color}.items() if v is not None}
        _lights[id] = replace(light, **changes)
        return _lights[id]

