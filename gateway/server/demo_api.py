"""A small weather-stations API the gateway serves under ``/demo``: the upstream of the HTTP-bound example tools
(``tool-definitions/http-demo.yaml``), so they work with no outside service.

    GET  /stations?q=&country=&limit=       search by name or id (q) and country code; newest reading included
    GET  /stations/{station_id}             one station and its latest reading; 404 if unknown
    POST /stations/{station_id}/readings    record a reading, JSON: {"temperature_c": number,
                                            "wind_kph"?: number, "conditions"?: [string], "note"?: string|null}
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
STATIONS = (
    {"id": "oslo-blindern", "name": "Oslo Blindern", "country": "NO", "elevation_m": 94, "lat": 59.94, "lon": 10.72},
    {"id": "bergen-florida", "name": "Bergen Florida", "country": "NO", "elevation_m": 12, "lat": 60.38, "lon": 5.33},
    {"id": "tromso", "name": "Tromsø", "country": "NO", "elevation_m": 100, "lat": 69.65, "lon": 18.94},
    {"id": "reykjavik", "name": "Reykjavík", "country": "IS", "elevation_m": 52, "lat": 64.13, "lon": -21.90},
    {"id": "zurich-fluntern", "name": "Zürich Fluntern", "country": "CH", "elevation_m": 556, "lat": 47.38,
     "lon": 8.57},
    {"id": "lyon-bron", "name": "Lyon Bron", "country": "FR", "elevation_m": 201, "lat": 45.73, "lon": 4.94},
    {"id": "valencia", "name": "València", "country": "ES", "elevation_m": 11, "lat": 39.48, "lon": -0.37},
    {"id": "edinburgh-gogarbank", "name": "Edinburgh Gogarbank", "country": "GB", "elevation_m": 57, "lat": 55.93,
     "lon": -3.34},
)
_SEED = {"oslo-blindern": 4.5, "bergen-florida": 7.1, "tromso": -3.2, "reykjavik": 2.8, "zurich-fluntern": 9.4,
         "lyon-bron": 13.0, "valencia": 19.6, "edinburgh-gogarbank": 8.2}
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
        self.readings: dict[str, deque[dict[str, Any]]] = {
            station["id"]: deque([{"temperature_c": _SEED[station["id"]], "wind_kph": 12.0, "conditions": ["cloudy"],
                                   "note": None, "observed_at": "2026-01-01T12:00:00Z"}], maxlen=KEEP_READINGS)
            for station in STATIONS
        }

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
            if (not q or q in s["id"] or q in s["name"].casefold()) and (not country or s["country"] == country)
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
