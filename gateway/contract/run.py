"""``tool-gateway test``: contract tests for definitions, for admins' CI.

For every selected tool the gateway can run itself:

1. each declared example (``examples:``) goes through ``invoke`` — the call path every surface uses, filters
   included — and its ``expect`` is checked: ``is_error`` (default false), ``result`` (equal as JSON),
   ``text_contains``, ``matches_output_schema``;
2. argument sets drawn from the input schema (``gateway.contract.draws``) go through ``invoke`` too. The contract:
   arguments the schema allows never end in an internal error (outcome ``failed``), are never refused by the
   gateway's own validator (``invalid_arguments``: it disagrees with the schema), and a result always matches
   the output schema. A tool's own error result (``is_error``, a timeout) is an answer the model can act on, so
   it is allowed and counted.

Tools that reach outside the process (an HTTP endpoint, an upstream) run only with ``--live``; tools that run
only in the browser cannot run here and are skipped; tools not annotated ``read_only`` get generated arguments
only with ``--include-writes``. Examples are declared calls and always run (with ``--live`` for remote tools).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from jsonschema.exceptions import relevance

from ..catalog.examples import example_name
from ..catalog.snapshot import Catalog, Tool
from ..context import CallContext
from ..errors import DefinitionsInvalid
from ..events import current_call
from ..invoke import invoke
from ..results import ToolResult
from ..schema.argerrors import describe, excerpt
from .draws import CannotDraw, DrawsUnavailable, draw_arguments

SURFACE = "test"  # what calls made here name as their surface (events, filters)
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
GENERATED = "generated arguments"  # the name of the one testcase per tool holding every generated call
MAX_SHOWN = 3  # failing argument sets printed per tool; the rest are counted
# An output-schema mismatch reaches us as an error result (outcome "error", like the tool's own errors): only its
# wording, fixed by gateway.results.normalise, tells it apart.
OUTPUT_MISMATCH = "does not match its output schema"
# Outcomes that break the contract whatever the arguments: see the module docstring.
BROKEN = {"failed": "internal error", "invalid_arguments": "refused arguments its input schema allows"}


class UntestableDefinitions(DefinitionsInvalid):
    """The definitions do not build, so nothing was tested: exit 2, apart from 1 for a failed test."""

    exit_code = 2


@dataclass(frozen=True)
class Options:
    samples: int = 20  # argument sets drawn per tool
    seed: int = 0
    live: bool = False  # call tools that reach outside the process
    include_writes: bool = False  # draw arguments for tools not annotated read_only
    generated: bool = True
    time_budget_s: float = 20.0  # per tool, for drawing and calling with generated arguments


@dataclass
class Case:
    """One testcase: an example, or the batch of generated argument sets."""

    name: str
    status: str
    where: str  # file:line:col of what it tests
    message: str = ""  # why it failed (the first failure) or was skipped
    failures: list[str] = field(default_factory=list)  # one line per failure, each starting with ``where``
    traceback: str = ""  # of the first internal error, from the log
    summary: str = ""  # for the generated batch: what the calls answered
    duration_s: float = 0.0


@dataclass
class ToolReport:
    tool: str
    cases: list[Case]
    skipped: str = ""  # why the whole tool was skipped

    @property
    def status(self) -> str:
        if any(case.status == FAILED for case in self.cases):
            return FAILED
        return SKIPPED if all(case.status == SKIPPED for case in self.cases) else PASSED


def select(catalog: Catalog, ids: Sequence[str] = (), toolsets: Sequence[str] = ()) -> list[Tool]:
    """The tools to test: all, or those both named in ``ids`` (``UnknownTool`` for an id no tool has) and in any
    of ``toolsets``, whichever are given."""
    for tool_id in ids:
        catalog.get(tool_id)
    return catalog.select(toolsets=toolsets, ids=ids or None)


async def run_contract(catalog: Catalog, tools: Iterable[Tool], options: Options) -> list[ToolReport]:
    """Test ``tools`` one after the other (a tool's calls one at a time, so its failures read in order)."""
    with _failure_log() as tracebacks:
        return [await _test_tool(catalog, tool, options, tracebacks) for tool in tools]


def _where(catalog: Catalog, tool: Tool, path: Sequence[str | int]) -> str:
    """``file:line:col`` of the node at ``path`` in the tool's declaration, the file named as from the working
    directory when it is one below the definitions directory, so that CI can link it (a plugin's stays
    ``<plugin>:file``)."""
    problem = tool.definition.problem(path, "")
    below = catalog.root / problem.file
    return f"{below if below.is_file() else problem.file}:{problem.line}:{problem.column}"


def _line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.splitlines())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _whole_tool_skip(tool: Tool, options: Options) -> str:
    if "server" not in tool.executors:
        return "runs only in the browser: it cannot be called from the command line"
    if "python" not in tool.definition.binding and not options.live:
        kinds = ", ".join(k for k in tool.definition.binding if k != "browser")
        return f"calls out ({kinds} binding): run with --live to call it"
    return ""


async def _test_tool(catalog: Catalog, tool: Tool, options: Options, tracebacks: dict[str, str]) -> ToolReport:
    report = ToolReport(tool.id, [], _whole_tool_skip(tool, options))
    for index, example in enumerate(tool.definition.examples):
        report.cases.append(await _example(catalog, tool, index, example, report.skipped, tracebacks))
    report.cases.append(await _generated(catalog, tool, options, report, tracebacks))
    return report


async def _example(catalog: Catalog, tool: Tool, index: int, example: Mapping[str, Any], skipped: str,
                   tracebacks: dict[str, str]) -> Case:
    title = example.get("title")
    name = f"example {index + 1}" + (f": {title}" if title else "")
    where = _where(catalog, tool, ["examples", index])
    if skipped:
        return Case(name, SKIPPED, where, skipped)
    started = time.perf_counter()
    result = await invoke(catalog, tool.id, example.get("arguments", {}), CallContext(surface=SURFACE))
    duration = time.perf_counter() - started
    traceback = tracebacks.pop(tool.id, "")
    unmet = unmet_expectations(tool, example.get("expect") or {}, result)
    if not unmet:
        return Case(name, PASSED, where, duration_s=duration)
    prefix = f"{where}: {tool.id} {example_name(example, index)}: "
    return Case(name, FAILED, where, unmet[0], [prefix + line for line in unmet], traceback, duration_s=duration)


def unmet_expectations(tool: Tool, expect: Mapping[str, Any], result: ToolResult) -> list[str]:
    """What ``result`` does not do of what ``expect`` asks, one line each: what was expected, what came."""
    if result.is_error != bool(expect.get("is_error", False)):
        if result.is_error:
            return [f"expected a result, got an error ({result.outcome or 'error'}): {_line(result.text)}"]
        return [f"expected an error, got a result: {excerpt(result.value, 200)}"]
    unmet = []
    if "result" in expect and not same_json(expect["result"], result.value):
        unmet.append(f"expected result {excerpt(expect['result'], 200)}, got {excerpt(result.value, 200)}")
    needle = expect.get("text_contains")
    if isinstance(needle, str) and needle not in result.text:
        unmet.append(f"expected text containing {excerpt(needle)}, got {excerpt(result.text, 200)}")
    if expect.get("matches_output_schema") is True and not result.is_error:
        validator = tool.output_validator
        errors = list(validator.iter_errors(result.value)) if validator is not None else []
        if validator is None:
            unmet.append("expected a result matching the output schema, but the tool has no output schema")
        elif errors:
            detail = describe(max(errors, key=relevance), validator.schema)[0]
            unmet.append(f"expected a result matching the output schema, got {excerpt(result.value)}: {detail}")
    return unmet


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: 4 equals 4.0, but true is not 1 (Python's ``==`` says it is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _generated_skip(tool: Tool, options: Options, report: ToolReport) -> str:
    if report.skipped:
        return report.skipped
    if not options.generated or options.samples <= 0:
        return "--no-generated"
    if tool.definition.annotations.get("read_only") is not True and not options.include_writes:
        return "not annotated read_only: generated arguments only with --include-writes"
    return ""


async def _generated(catalog: Catalog, tool: Tool, options: Options, report: ToolReport,
                     tracebacks: dict[str, str]) -> Case:
    where = _where(catalog, tool, ["id"])
    reason = _generated_skip(tool, options, report)
    if reason:
        return Case(GENERATED, SKIPPED, where, reason)
    started = time.perf_counter()
    deadline = time.monotonic() + options.time_budget_s
    try:
        argument_sets = draw_arguments(tool.input_schema, options.samples, options.seed, tool.id, deadline)
    except DrawsUnavailable as exc:
        return Case(GENERATED, SKIPPED, where, str(exc))
    except CannotDraw as exc:
        return Case(GENERATED, SKIPPED, where, f"cannot draw arguments from the input schema: {exc}")
    broken: list[tuple[Any, str]] = []
    tool_errors = called = 0
    for arguments in argument_sets:
        if time.monotonic() > deadline:
            break
        result = await invoke(catalog, tool.id, arguments, CallContext(surface=SURFACE))
        called += 1
        problem = _broken(result)
        if problem:
            broken.append((arguments, problem))
        elif result.is_error:
            tool_errors += 1
    summary = f"{called} generated" + (f", {len(broken)} failed" if broken else "")
    summary += f" ({tool_errors} tool error{'s' if tool_errors != 1 else ''})" if tool_errors else ""
    if called < len(argument_sets) or (len(argument_sets) < options.samples and time.monotonic() > deadline):
        summary += f", stopped by the time budget ({options.time_budget_s:g} s)"
    lines = [f"{where}: {tool.id} with {GENERATED} {excerpt(arguments, 200)}: {problem}"
             for arguments, problem in broken[:MAX_SHOWN]]
    if len(broken) > MAX_SHOWN:
        lines.append(f"{where}: {tool.id}: {len(broken) - MAX_SHOWN} more failing argument set(s)")
    return Case(GENERATED, FAILED if broken else PASSED, where, broken[0][1] if broken else "", lines,
                tracebacks.pop(tool.id, ""), summary, time.perf_counter() - started)


def _broken(result: ToolResult) -> str:
    """How ``result`` breaks the contract for arguments its schema allows, or ""."""
    if result.outcome in BROKEN:
        return f"{BROKEN[result.outcome]}: {_line(result.text)}"
    if result.is_error and OUTPUT_MISMATCH in result.text:
        return _line(result.text)
    return ""


@contextmanager
def _failure_log() -> Iterator[dict[str, str]]:
    """Tool id -> the traceback of its latest internal error. ``invoke`` logs each with its traceback; here the
    traceback goes to the report (JUnit and the terminal) instead of repeating on stderr for every draw."""
    tracebacks: dict[str, str] = {}
    formatter = logging.Formatter()

    def keep(record: logging.LogRecord) -> bool:
        call = current_call.get()
        if call is None or record.exc_info is None:
            return True
        tracebacks.setdefault(call.tool, formatter.formatException(record.exc_info))
        return False

    logger = logging.getLogger("gateway.invoke")
    logger.addFilter(keep)
    try:
        yield tracebacks
    finally:
        logger.removeFilter(keep)


def tool_line(report: ToolReport) -> str:
    """``PASS  square_root  examples 2/2 passed, 20 generated (2 tool errors)``: one line per tool."""
    label = {PASSED: "PASS", FAILED: "FAIL", SKIPPED: "SKIP"}[report.status]
    if report.skipped:
        return f"{label}  {report.tool}  {report.skipped}"
    examples = [case for case in report.cases if case.name != GENERATED]
    generated = report.cases[-1]
    parts = [f"examples {sum(c.status == PASSED for c in examples)}/{len(examples)} passed" if examples
             else "no examples"]
    parts.append(generated.summary if generated.status != SKIPPED else f"generated skipped: {generated.message}")
    return f"{label}  {report.tool}  " + "; ".join(parts)


def report_lines(reports: Sequence[ToolReport]) -> Iterator[str]:
    """The terminal report: a line per tool, under it a line per failure and the first internal error's
    traceback, and a closing count."""
    for report in reports:
        yield tool_line(report)
        for case in report.cases:
            yield from (f"  {line}" for line in case.failures)
            if case.traceback:
                yield from (f"    {line}" for line in case.traceback.splitlines())
    counts = {status: sum(r.status == status for r in reports) for status in (PASSED, FAILED, SKIPPED)}
    yield f"{len(reports)} tool(s): {counts[PASSED]} passed, {counts[FAILED]} failed, {counts[SKIPPED]} skipped"
