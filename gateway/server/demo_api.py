"""A small weather-stations API the gateway serves under ``/demo``: the upstream of the HTTP-bound example
tools (``tool-definitions/http-demo.yaml``), so they work with no outside service.

    GET  /stations?q=&country=&limit=       search by name or id (q) and country code; newest reading included
    GET  /stations/{station_id}             one station and its latest reading; 404 if unknown
    POST /stations/{station_id}/readings    record a reading, JSON: {"temperature_c": number,
                                              "wind_kph"?: number, "conditions"?: [string],
                                              "note"?: string|null}
                                            → 201 with the stored reading; 422 with the reasons if invalid

Readings are kept in memory (the last ``KEEP_READINGS`` per station), per ``routes()`` call.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

KEEP_READINGS = 20
MAX_LIMIT = 50
_FIELDS = ("id", "name", "country", "elevation_m", "lat", "lon")
STATIONS = tuple(dict(zip(_FIELDS, row, strict=True)) for row in (
    ("oslo-blindern", "Oslo Blindern", "NO", 94, 59.94, 10.72),
    ("bergen-florida", "Bergen Florida", "NO", 12, 60.38, 5.33),
    ("tromso", "Tromsø", "NO", 100, 69.65, 18.94),
    ("reykjavik", "Reykjavík", "IS", 52, 64.13, -21.90),
    ("zurich-fluntern", "Zürich Fluntern", "CH", 556, 47.38, 8.57),
    ("lyon-bron", "Lyon Bron", "FR", 201, 45.73, 4.94),
    ("valencia", "València", "ES", 11, 39.48, -0.37),
    ("edinburgh-gogarbank", "Edinburgh Gogarbank", "GB", 57, 55.93, -3.34),
))
# The first reading of each station (°C), so that a fresh server has something to show.
_SEED = {"oslo-blindern": 4.5, "bergen-florida": 7.1, "tromso": -3.2, "reykjavik": 2.8,
         "zurich-fluntern": 9.4, "lyon-bron": 13.0, "valencia": 19.6, "edinburgh-gogarbank": 8.2}
_READING_FIELDS = {"temperature_c", "wind_kph", "conditions", "note"}


def routes() -> list[BaseRoute]:
    """The demo API's routes, with a fresh in-memory store of readings."""
    store = _Store()
    return [
        Route("/stations", store.search, methods=["GET"]),
        Route("/stations/{station_id}", store.get, methods=["GET"]),
        Route("/stations/{station_id}/readings", store.add_reading, methods=["POST"]),
    ]


class _Store:
    def __init__(self) -> None:
        self.readings: dict[str, deque[dict[str, Any]]] = {}
        for station_id, temperature in _SEED.items():
            first = {"temperature_c": temperature, "wind_kph": 12.0, "conditions": ["cloudy"], "note": None,
                     "observed_at": "2026-01-01T12:00:00Z"}
            self.readings[station_id] = deque([first], maxlen=KEEP_READINGS)

    def _view(self, station: dict[str, Any]) -> dict[str, Any]:
        return {**station, "latest_reading": self.readings[station["id"]][-1]}

    async def search(self, request: Request) -> JSONResponse:
        q = request.query_params.get("q", "").casefold()
        country = request.query_params.get("country", "").upper()
        try:
            limit = int(request.query_params.get("limit", "10"))
        except ValueError:
            return _error(422, "limit must be an integer")
        if not 1 <= limit <= MAX_LIMIT:
            return _error(422, f"limit must be between 1 and {MAX_LIMIT}")
        found = [
            self._view(s) for s in STATIONS
            if (not q or q in s["id"] or q in s["name"].casefold())
            and (not country or s["country"] == country)
        ]
        return JSONResponse({"count": len(found), "stations": found[:limit]})

    async def get(self, request: Request) -> JSONResponse:
        station = _find(request.path_params["station_id"])
        if station is None:
            return _unknown(request.path_params["station_id"])
        return JSONResponse(self._view(station))

    async def add_reading(self, request: Request) -> JSONResponse:
        station = _find(request.path_params["station_id"])
        if station is None:
            return _unknown(request.path_params["station_id"])
        try:
            body = await request.json()
        except ValueError:
            return _error(422, "the body must be JSON")
        problems = _reading_problems(body)
        if problems:
            return _error(422, "invalid reading", problems)
        reading = {
            "temperature_c": body["temperature_c"],
            "wind_kph": body.get("wind_kph"),
            "conditions": body.get("conditions", []),
            "note": body.get("note"),
            "observed_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        self.readings[station["id"]].append(reading)
        return JSONResponse({"station_id": station["id"], "reading": reading}, status_code=201)


def _reading_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["the body must be a JSON object"]
    problems = [f"unknown field '{key}'" for key in body if key not in _READING_FIELDS]
    if not _is_number(body.get("temperature_c")):
        problems.append("temperature_c is required and must be a number")
    if "wind_kph" in body and not (_is_number(body["wind_kph"]) and body["wind_kph"] >= 0):
        problems.append("wind_kph must be a number >= 0")
    conditions = body.get("conditions", [])
    if not isinstance(conditions, list) or not all(isinstance(c, str) for c in conditions):
        problems.append("conditions must be a list of strings")
    if body.get("note") is not None and not isinstance(body["note"], str):
        problems.append("note must be a string or null")
    return problems


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _find(station_id: str) -> dict[str, Any] | None:
    return next((s for s in STATIONS if s["id"] == station_id), None)


def _unknown(station_id: str) -> JSONResponse:
    return _error(404, f"no station '{station_id}' (search with GET /demo/stations?q=...)")


def _error(status: int, message: str, details: list[str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if details:
        body["details"] = details
    return JSONResponse(body, status_code=status)
