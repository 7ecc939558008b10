"""``gateway.catalog.drafts.DraftChecker``: a check whose build is abandoned leaves that build its caches, and the next
check starts on fresh ones (caches serve one build at a time)."""

from __future__ import annotations

import asyncio

from gateway.catalog.drafts import DraftChecker
from gateway.settings import Settings

SLOW_MODULE = """
import time

time.sleep(1.5)  # the build is still importing this when its check is abandoned


def look(query: str) -> str:
    return query
"""

TOOLS = """
tools:
  - {id: slow, name: Slow, user_description: Waits., ai_description: Waits on its import., binding: {python: "slow:look"}}
"""


def test_a_cancelled_check_leaves_its_build_the_caches_it_was_handed(write_definitions):
    """The caller of a check went away (its task cancelled) while the build ran on: that build keeps the caches it
    was handed and the next check gets fresh ones, as after a timeout; that next check still answers."""
    root = write_definitions({"python/slow.py": SLOW_MODULE, "tools.yaml": TOOLS})
    checker = DraftChecker(Settings(definitions=root, reload=False))

    async def scenario() -> None:
        handed = checker._caches
        check = asyncio.create_task(checker.check("tools.yaml", TOOLS))
        await asyncio.sleep(0.3)
        check.cancel()
        await asyncio.gather(check, return_exceptions=True)
        assert checker._caches is not handed
        assert not any(problem.severity == "error" for problem in await checker.check("tools.yaml", TOOLS))

    asyncio.run(scenario())
