"""The Semantic Kernel example of functions built at runtime: get_time and diff_time."""

from datetime import UTC, datetime
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def get_time(timezone_name: Annotated[str, "IANA time zone, e.g. Europe/Warsaw; default UTC."] = "UTC") -> str:
    try:
        zone = ZoneInfo(timezone_name) if timezone_name != "UTC" else UTC
    except (ZoneInfoNotFoundError, ValueError):
        from gateway import ToolError

        raise ToolError(f"Unknown time zone {timezone_name!r}; use an IANA name such as 'Europe/Warsaw'.") from None
    return datetime.now(zone).isoformat(timespec="seconds")


def diff_time(
    start: Annotated[datetime, "Start, ISO 8601 date-time with offset."],
    end: Annotated[datetime, "End, ISO 8601 date-time with offset."],
) -> dict:
    if (start.tzinfo is None) != (end.tzinfo is None):
        from gateway import ToolError

        raise ToolError("Give both times with a UTC offset, or both without.")
    seconds = (end - start).total_seconds()
    return {"seconds": seconds, "minutes": seconds / 60, "hours": seconds / 3600, "days": seconds / 86400}
