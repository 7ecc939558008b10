"""Admins' Python code cannot take a running server down: a tool's exit is a tool failure, a hung tool keeps to
its share of worker threads, and a module that exits or hangs at import fails a reload, not the server."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import textwrap
import threading

import httpx
import pytest
import yaml
from support import CONSOLE, catalog_for, until_async

from gateway.invoke import invoke

MODULE = "isolation_tools"  # a name of its own: the module is shared by the process's import system
TOOLS_PY = '''
import asyncio
import threading
import time

started = 0  # sync calls of `hang` and `block` that began running
gate = threading.Event()  # `block` and `blocking_filter` wait for it; tests set it when they end
filtered = []  # the calls `blocking_filter` let in (a list: appends from many threads are never lost)


def hello() -> str:
    return "hello"


def hang(seconds: float) -> str:
    global started
    started += 1
    time.sleep(seconds)
    return "late"


def block() -> str:
    global started
    started += 1
    gate.wait(30)
    return "unblocked"


def exits(code: int) -> str:
    raise SystemExit(code)


def interrupts() -> str:
    raise KeyboardInterrupt()


def closes() -> str:
    raise GeneratorExit()


def blocking_filter(call, next):
    filtered.append(call.tool_id)
    gate.wait(30)
    return next()


def passing_filter(call, next):
    return next()


async def exits_async(code: int) -> str:
    raise SystemExit(code)


async def interrupts_async() -> str:
    raise KeyboardInterrupt()


async def sleeps_async() -> str:
    await asyncio.sleep(30)
    return "never"
'''


# Tools that run `hello` behind a sync filter of theirs: tool id -> the filter.
FILTERED = {"gated": "blocking_filter", "screened": "passing_filter"}


def _tools(**timeouts: float) -> str:
    tools = []
    for name in ("hello", "hang", "block", "exits", "interrupts", "closes", "exits_async", "interrupts_async",
                 "sleeps_async", *FILTERED):
        tool = {"id": name, "name": name, "user_description": "u", "ai_description": "a",
                "binding": {"python": f"{MODULE}:{'hello' if name in FILTERED else name}"}}
        if name in FILTERED:
            tool["filters"] = [f"{MODULE}:{FILTERED[name]}"]
        if name in timeouts:
            tool["timeout_s"] = timeouts[name]
        tools.append(tool)
    return yaml.safe_dump({"tools": tools}, sort_keys=False)


@pytest.fixture
def isolation_defs(write_definitions):
    """Definitions of the test tools; whatever `block` still waits for is released at the end."""
    root = write_definitions({f"python/{MODULE}.py": textwrap.dedent(TOOLS_PY),
                              "tools.yaml": _tools(hello=2, hang=1, block=1, sleeps_async=0.3, gated=1, screened=5)})
    yield root
    module = sys.modules.get(MODULE)
    if module is not None:
        module.gate.set()


@pytest.mark.parametrize(("tool", "arguments", "raised"), [
    ("exits", {"code": 7}, "SystemExit"),
    ("exits", {"code": 0}, "SystemExit"),
    ("interrupts", {}, "KeyboardInterrupt"),
    ("closes", {}, "GeneratorExit"),
    ("exits_async", {"code": 7}, "SystemExit"),
    ("interrupts_async", {}, "KeyboardInterrupt"),
])
async def test_tool_raising_exit_or_interrupt_is_an_error_result_with_a_logged_reference(
        isolation_defs, start_server, caplog, tool, arguments, raised):
    """A tool raising SystemExit, KeyboardInterrupt or GeneratorExit answers 200 with is_error and a log
    reference, the exception is logged under that reference, and the next call is served normally."""
    served = start_server(isolation_defs)
    with caplog.at_level(logging.ERROR, logger="gateway.invoke"):
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            failed = await http.post(f"/tools/{tool}/call", json=arguments)
            after = await http.post("/tools/hello/call", json={})
    assert failed.status_code == 200, failed.text
    body = failed.json()
    assert body["is_error"]
    reference = re.search(r"ref ([0-9a-f]+)", body["text"]).group(1)
    assert "internal error" in body["text"]
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert type(logged[0].exc_info[1].__cause__).__name__ == raised
    assert after.status_code == 200 and after.json()["result"] == "hello"


async def test_timed_out_async_tool_is_still_cancelled(isolation_defs):
    """Cancellation keeps its meaning: an async tool past its timeout is cancelled and reported as a timeout."""
    result = await invoke(catalog_for(isolation_defs), "sleeps_async")
    assert result.is_error and "did not finish within 0.3 s" in result.text


async def test_one_hung_tool_does_not_starve_an_unrelated_sync_tool(isolation_defs, start_server):
    """While 60 calls of a sync tool that sleeps 5 s (timeout 1 s) are in flight, an unrelated sync tool with a
    2 s timeout still answers with its normal result."""
    served = start_server(isolation_defs)
    async with httpx.AsyncClient(base_url=served.url, timeout=30,
                                 limits=httpx.Limits(max_connections=100)) as http:
        hung = [asyncio.create_task(http.post("/tools/hang/call", json={"seconds": 5})) for _ in range(60)]
        module = sys.modules[MODULE]
        for _ in range(1000):  # until the hung calls hold their threads (bounded: 10 s)
            if module.started >= served.gateway.settings.max_concurrent_calls_per_tool:
                break
            await asyncio.sleep(0.01)
        unrelated = await http.post("/tools/hello/call", json={})
        answers = await asyncio.gather(*hung)
    assert unrelated.json()["result"] == "hello", unrelated.text
    assert all(a.json()["is_error"] and "did not finish within 1 s" in a.json()["text"] for a in answers)


def _filter_threads() -> int:
    return sum(thread.name.startswith("gateway-filter") for thread in threading.enumerate())


async def test_one_hung_sync_filter_does_not_starve_another_tools_sync_filter(isolation_defs, start_server):
    """While 140 calls of a tool whose sync filter blocks are in flight (timeout 1 s), an unrelated tool's sync
    filter still runs and its call answers: the blocked filter holds at most max_concurrent_calls_per_tool
    threads, and its tool's calls beyond them end as the timeout error without taking one."""
    served = start_server(isolation_defs)
    cap = served.gateway.settings.max_concurrent_calls_per_tool
    module = sys.modules[MODULE]
    threads_before = _filter_threads()
    async with httpx.AsyncClient(base_url=served.url, timeout=30,
                                 limits=httpx.Limits(max_connections=150)) as http:
        gated = [asyncio.create_task(http.post("/tools/gated/call", json={})) for _ in range(140)]
        await until_async(lambda: len(module.filtered) >= cap, "the blocking filter to hold its threads")
        screened = await http.post("/tools/screened/call", json={})
        threads = _filter_threads() - threads_before
        answers = await asyncio.gather(*gated)
    entered = len(module.filtered)
    module.gate.set()
    assert screened.json()["result"] == "hello", screened.text
    assert entered == cap and threads <= cap + 1, (entered, threads)
    assert all(a.json()["is_error"] and "did not finish within 1 s" in a.json()["text"] for a in answers)


async def test_timed_out_sync_call_keeps_its_tool_slot_until_its_thread_ends(isolation_defs):
    """With a cap of 2, two timed-out calls whose threads still run keep a third call from starting (it times
    out waiting); once those threads end, the tool runs again."""
    catalog = catalog_for(isolation_defs, max_concurrent_calls_per_tool=2)
    first = await asyncio.gather(invoke(catalog, "block"), invoke(catalog, "block"))
    module = sys.modules[MODULE]
    assert all(r.is_error for r in first) and module.started == 2
    third = await invoke(catalog, "block")
    assert third.is_error and "did not finish" in third.text and module.started == 2
    module.gate.set()
    fourth = await invoke(catalog, "block")
    assert fourth.value == "unblocked" and module.started == 3


async def test_reload_reports_modules_that_exit_interrupt_or_hang_at_import(isolation_defs, start_server):
    """A reload whose python/ modules exit, interrupt or hang at import answers 422 with a problem at each
    binding within import_timeout_s, the server keeps serving, and a reload after the fix succeeds."""
    served = start_server(isolation_defs, import_timeout_s=1)
    bad = {"srv_exits": "import sys\nsys.exit(3)\n", "srv_interrupts": "raise KeyboardInterrupt\n",
           "srv_hangs": "import time\ntime.sleep(3600)\n"}
    for name, text in bad.items():
        (isolation_defs / "python" / f"{name}.py").write_text(text)
    extra = [{"id": name, "name": name, "user_description": "u", "ai_description": "a",
              "binding": {"python": f"{name}:f"}} for name in bad]
    (isolation_defs / "extra.yaml").write_text(yaml.safe_dump({"tools": extra}))
    async with httpx.AsyncClient(base_url=served.url, timeout=60, auth=CONSOLE) as http:
        failed = await http.post("/admin/reload")
        still = await http.post("/tools/hello/call", json={})
        for name in bad:
            (isolation_defs / "python" / f"{name}.py").write_text("def f() -> str:\n    return 'fixed'\n")
        fixed = await http.post("/admin/reload")
        called = await http.post("/tools/srv_hangs/call", json={})
    assert failed.status_code == 422, failed.text
    problems = [p["text"] for p in failed.json()["problems"]]
    assert len(problems) == 3 and all(p.startswith("extra.yaml:") for p in problems), problems
    assert still.json()["result"] == "hello"
    assert fixed.status_code == 200, fixed.text
    assert called.json()["result"] == "fixed"
