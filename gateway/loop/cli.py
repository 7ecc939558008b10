"""``tool-gateway chat "question"``: one conversation turn against the configured LLM, in the terminal.

The answer goes to stdout and the trace of tools to stderr, so ``answer=$(tool-gateway chat ...)`` holds only
the answer. Tools that run only in a browser cannot run here: their calls are answered with an error result,
and the model goes on without them.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ..runtime.gateway import Gateway
from ..settings import Settings
from .config import load_loop_config
from .loop import ChatLoop, Finished
from .request import ChatRequest
from .trace import ToolExecution

NO_BROWSER = "This tool runs in the user's browser, and there is none in the command line."


def run_chat(settings: Settings, message: str, provider: str | None = None) -> int:
    """Print the answer to ``message`` and the tools run for it; ``provider`` names one from the settings."""
    loop_config = load_loop_config(settings)
    gateway = Gateway(settings)
    loop = ChatLoop(loop_config, gateway.http_client, searches=gateway.searches)
    finished = asyncio.run(_converse(gateway, loop, message, provider))
    for execution in finished.trace:
        print(describe(execution), file=sys.stderr)
    print(finished.content)
    return 0


async def _converse(gateway: Gateway, loop: ChatLoop, message: str, provider: str | None) -> Finished:
    try:
        messages: list[dict] = [{"role": "user", "content": message}]
        trace: list[ToolExecution] = []
        while True:
            finished = await loop.complete(gateway.catalog, ChatRequest(messages=tuple(messages), model=provider))
            trace += finished.trace
            if not finished.tool_calls:
                return Finished(finished.content, (), finished.finish_reason, finished.model, finished.usage,
                                tuple(trace))
            # Browser tools were handed back: answer them as failed, which resumes the loop on the next pass.
            messages.append({"role": "assistant", "content": finished.content or None,
                             "tool_calls": [call.as_openai() for call in finished.tool_calls]})
            messages += [{"role": "tool", "tool_call_id": call.id, "content": NO_BROWSER, "is_error": True}
                         for call in finished.tool_calls]
    finally:
        await gateway.aclose()


def describe(execution: ToolExecution) -> str:
    """``✓ square_root {"x": 2} → 1.4142135623730951 (0.3 ms)`` — one line per tool call."""
    arguments = execution.arguments if isinstance(execution.arguments, str) else json.dumps(execution.arguments,
                                                                                             ensure_ascii=False)
    outcome = f"error: {execution.error}" if execution.is_error else json.dumps(execution.result, ensure_ascii=False)
    timing = f" ({execution.duration_ms:g} ms)" if execution.duration_ms is not None else ""
    side = "" if execution.side == "server" else f" [{execution.side}]"
    return f"{'✗' if execution.is_error else '✓'} {execution.tool}{side} {arguments} → {outcome}{timing}"
