"""Sync tools' worker threads (gateway.bindings.workers): context, exits, errors, and the process's exit."""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import textwrap
import threading

import pytest

from gateway.bindings.workers import ToolAborted, call_sync

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _whoami() -> tuple[str, str]:
    return _who.get(), threading.current_thread().name


def test_a_sync_tool_sees_the_callers_context_variables_in_a_worker_thread() -> None:
    """A sync tool runs off the event loop's thread and sees the context variables its caller set."""

    async def main() -> tuple[str, str, str]:
        _who.set("caller")
        who, thread = await call_sync("ctx", 2, _whoami, {})
        return who, thread, threading.current_thread().name

    who, thread, loop_thread = asyncio.run(main())
    assert who == "caller" and thread != loop_thread and thread.startswith("gateway-tool")


def _exits() -> None:
    raise SystemExit(3)


def _fails(x: int) -> None:
    raise ValueError(f"bad {x}")


def test_a_tools_exit_is_a_failure_and_its_errors_reach_the_caller() -> None:
    """SystemExit in a sync tool reaches the caller as ToolAborted (from the original); other errors as they are."""

    async def main() -> None:
        with pytest.raises(ToolAborted) as aborted:
            await call_sync("exit", 2, _exits, {})
        assert isinstance(aborted.value.__cause__, SystemExit) and "SystemExit(3)" in str(aborted.value)
        with pytest.raises(ValueError, match="bad 7"):
            await call_sync("fail", 2, _fails, {"x": 7})
        assert await call_sync("exit", 2, _whoami, {})  # the slots were given back: the tool still answers

    asyncio.run(main())


def _same(x: int) -> int:
    return x


def test_many_calls_at_once_all_answer() -> None:
    """More concurrent calls than one tool's cap all answer, each its own value."""

    async def main() -> list[int]:
        return await asyncio.gather(*(call_sync("many", 4, _same, {"x": i}) for i in range(50)))

    assert asyncio.run(main()) == list(range(50))


def test_a_hung_tool_does_not_hold_up_the_process_exit() -> None:
    """A process whose sync tool outlived its caller's timeout still exits when its main code is done."""
    script = textwrap.dedent("""
        import asyncio, time
        from gateway.bindings.workers import call_sync

        def hang(seconds):
            time.sleep(seconds)

        async def main():
            try:
                async with asyncio.timeout(0.2):
                    await call_sync("hang", 1, hang, {"seconds": 3600})
            except TimeoutError:
                print("timed out", flush=True)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=30)
    assert done.stdout == "timed out\n" and done.returncode == 0, done.stderr
