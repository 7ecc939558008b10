"""Argument sets drawn from a tool's input schema, for ``tool-gateway test`` (``gateway.contract.run``).

``hypothesis-jsonschema`` turns the schema into a Hypothesis strategy; Hypothesis draws from it. Both come with
the ``contract`` extra and are imported only here, only when asked: without them ``tool-gateway test`` still runs
the examples (``DrawsUnavailable`` says what to install).

Hypothesis is made to draw, not to test: it runs with a fixed seed (the same draws on every run, so a CI failure
can be reproduced), generation only (no shrinking, no replay of past failures, no example database written to
the working directory), health checks off (a slow or filtering schema is not an error here) and no output. The
drawing stops at a deadline, so one tool with a costly schema cannot stall the run.
"""

from __future__ import annotations

import time
import warnings
import zlib
from collections.abc import Mapping
from typing import Any

INSTALL_HINT = "install tool-gateway[contract] for generated arguments"
# hypothesis 6.170.10 dropped an internal (``many.more``) that hypothesis-jsonschema up to 0.23.1 calls for every
# object schema; the contract extra bounds hypothesis below it, but another requirement may have pulled it up.
INCOMPATIBLE_HINT = ("the installed hypothesis is newer than hypothesis-jsonschema {version} can draw with (it calls "
                     "an internal hypothesis 6.170.10 removed): install tool-gateway[contract], which bounds "
                     "hypothesis below 6.170.10, for generated arguments")


class DrawsUnavailable(Exception):
    """The contract extra is not installed, or not in versions that work together; the message says what to do."""


class CannotDraw(Exception):
    """The schema is one hypothesis-jsonschema cannot draw from (an unsupported keyword or format)."""


class _OutOfTime(Exception):
    pass


def draw_arguments(schema: Mapping[str, Any], count: int, seed: int, tool_id: str, deadline: float) -> list[Any]:
    """Up to ``count`` argument sets that match ``schema``; fewer when the schema allows fewer distinct values or
    ``deadline`` (``time.monotonic()``) passes. Each tool draws its own sequence from ``seed`` and its id.

    What hypothesis-jsonschema warns about (a pattern Python's ``re`` cannot read) is part of the answer, not
    noise on stderr: ``CannotDraw`` carries it when nothing could be drawn."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            return _draw(schema, count, seed, tool_id, deadline)
        except CannotDraw as exc:
            told = "; ".join(_first_sentence(str(w.message)) for w in warned)
            raise CannotDraw(f"{exc} ({told})" if told else str(exc)) from None


def _draw(schema: Mapping[str, Any], count: int, seed: int, tool_id: str, deadline: float) -> list[Any]:
    try:
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as seeded
        from hypothesis.internal.conjecture import utils as conjecture
        from hypothesis_jsonschema import __version__ as jsonschema_draws_version
        from hypothesis_jsonschema import from_schema
    except ImportError:
        raise DrawsUnavailable(INSTALL_HINT) from None
    if not hasattr(conjecture.many, "more") and _release(jsonschema_draws_version) <= (0, 23, 1):
        raise DrawsUnavailable(INCOMPATIBLE_HINT.format(version=jsonschema_draws_version))
    try:
        strategy = from_schema(dict(schema))
    except Exception as exc:  # noqa: BLE001 — hypothesis-jsonschema raises several kinds for what it cannot do
        raise CannotDraw(_first_sentence(f"{type(exc).__name__}: {exc}")) from None
    drawn: list[Any] = []

    @seeded(seed * 1_000_003 + zlib.crc32(tool_id.encode()))
    @settings(max_examples=count, database=None, deadline=None, derandomize=False, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False)
    @given(strategy)
    def draw(arguments: Any) -> None:
        if time.monotonic() > deadline:
            raise _OutOfTime
        drawn.append(arguments)

    try:
        draw()
    except _OutOfTime:
        pass
    except Exception as exc:  # noqa: BLE001 — the strategy failed while drawing (an unsatisfiable schema)
        if not drawn:
            raise CannotDraw(_first_sentence(f"{type(exc).__name__}: {exc}")) from None
    return drawn


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".")


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string: "0.23.1" -> (0, 23, 1)."""
    numbers = []
    for part in version.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)
