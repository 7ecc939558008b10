"""Sync tools' worker threads run under Linux's SCHED_BATCH, so that waking one never preempts the event loop."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from gateway.bindings.workers import call_sync


def _policies() -> tuple[int, int]:
    return os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_BATCH is Linux's")
def test_a_sync_tool_runs_under_sched_batch_at_the_processs_priority() -> None:
    """A worker thread's scheduling policy is SCHED_BATCH (no wakeup preemption of the loop's thread) and its nice
    value is the loop thread's: the same share of the CPU, only not preferred when woken."""

    async def main() -> tuple[tuple[int, int], tuple[int, int]]:
        return await call_sync("policy", 2, _policies, {}), _policies()

    (worker_policy, worker_nice), (loop_policy, loop_nice) = asyncio.run(main())
    assert worker_policy == os.SCHED_BATCH and loop_policy == os.SCHED_OTHER
    assert worker_nice == loop_nice
