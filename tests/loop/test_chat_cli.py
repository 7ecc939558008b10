"""``tool-gateway chat "question"``: one turn in a real process against the scripted LLM; answer and trace printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from fake_llm import FakeLLM, Reply, openai_provider


def chat(tmp_path: Path, defs: Path, llm: FakeLLM, *args: str, providers: dict | None = None) -> subprocess.CompletedProcess:
    settings = tmp_path / "gateway.yaml"
    chosen = providers if providers is not None else {"default": openai_provider(llm)}
    settings.write_text(yaml.safe_dump({"providers": chosen, "chat": {"toolsets": ["math", "test"]}}))
    env = {**os.environ, "FAKE_LLM_KEY": "sk-cli"}
    command = [sys.executable, "-m", "gateway", "--settings", str(settings), "chat", *args, "-d", str(defs)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_chat_prints_the_answer_and_the_trace(tmp_path, defs, llm):
    """The answer goes to stdout and one line per tool call to stderr."""
    llm.answer(Reply(tool_calls=[("call_1", "square_root", {"x": 475695037565})]), Reply(content="689706.486532"))
    done = chat(tmp_path, defs, llm, "What is the square root of 475695037565?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "689706.486532\n"
    assert '✓ square_root {"x": 475695037565} → 689706.4865324959 (' in done.stderr
    assert llm.requests[0].headers["authorization"] == "Bearer sk-cli"


def test_browser_tools_are_answered_as_unavailable(tmp_path, defs, llm):
    """A browser-only tool called from the command line gets an error result and the model goes on."""
    llm.answer(Reply(tool_calls=[("call_1", "fill_field", {"field": "a", "value": "1"})]), Reply(content="Cannot."))
    done = chat(tmp_path, defs, llm, "fill the form")
    assert done.returncode == 0 and done.stdout == "Cannot.\n"
    assert "✗ fill_field [client]" in done.stderr and "runs in the user's browser" in done.stderr
    [(_, result)] = [(m["tool_call_id"], m["content"]) for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert "runs in the user's browser" in result


def test_chat_without_a_provider_says_what_to_configure(tmp_path, defs, llm):
    """With no provider configured the command fails with one line saying so, not a traceback."""
    done = chat(tmp_path, defs, llm, "hi", providers={})
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: No LLM provider is configured: add 'providers' (and 'chat') to the "
                                   "settings.")
