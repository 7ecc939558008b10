"""The admin console's API under attack by what reaches it (a real server on 127.0.0.1, loopback admin, auth
off): paths that try to leave the definitions directory or break the file system, saves that race, drafts that
cost, readers that never read, and secrets in the views. Never a 500, nothing outside the directory touched."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from support import CONSOLE, serving

from gateway.observe import live
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

SECRET = "Adm1nS3cretV4lue-9d2f"
TOOLS = """
tools:
  - id: echo
    name: Echo
    user_description: Says the text back.
    ai_description: Says the text back.
    binding: {python: "echoing:echo"}
  - id: keyed
    name: Keyed
    user_description: Needs a key.
    ai_description: Sends a secret upstream (never called here; its definition names the secret).
    binding:
      http:
        url: "http://127.0.0.1:9/x"
        headers: {X-Key: "{{ secrets.ADMIN_TEST_SECRET }}"}
"""


@dataclass
class Console:
    url: str
    root: Path
    outside: Path


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    monkeypatch.setenv("ADMIN_TEST_SECRET", SECRET)
    root = tmp_path / "defs"
    (root / "python").mkdir(parents=True)
    (root / "tools.yaml").write_text(TOOLS)
    (root / "python" / "echoing.py").write_text("def echo(text: str) -> str:\n    return text\n")
    outside = tmp_path / "outside.yaml"
    outside.write_text("tools: []\n")
    gateway = Gateway(Settings(definitions=root, reload=False, import_timeout_s=1, reload_timeout_s=20))
    with serving(create_app(gateway), lifespan="on") as served:
        yield Console(served.url, root, outside)


HOSTILE_PATHS = [
    "..%2Foutside.yaml", "%2e%2e/outside.yaml", "..%5Coutside.yaml", "x%00.yaml", "x.yaml%00.txt",
    "..data/x.yaml", ".hidden.yaml", "escape.yaml", "%C0%AE%C0%AE/outside.yaml", "/etc/passwd.yaml",
    "a/" * 400 + "x.yaml", "x" * 2_000 + ".yaml", "x.yaml/",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_paths_are_refused_in_words_and_touch_nothing_outside(console, path):
    """Encoded, NUL, backslash, hidden, symlinked-out and over-long paths are a 4xx on read, save, create and
    check, and the file outside the directory is unchanged."""
    (console.root / "escape.yaml").symlink_to(console.outside)  # made after the build, which would refuse it
    with httpx.Client(base_url=console.url, timeout=30, auth=CONSOLE) as http:
        answers = [http.get(f"/admin/api/files/{path}"),
                   http.put(f"/admin/api/files/{path}", json={"text": "tools: []\n", "base_sha256": "0" * 64}),
                   http.post("/admin/api/files", json={"path": path.replace("%00", "\0"), "template": "python"}),
                   http.post("/admin/api/check", json={"path": path, "text": "tools: []\n"})]
    assert all(400 <= a.status_code < 500 for a in answers), [(a.status_code, a.text[:200]) for a in answers]
    assert all("error" in a.json() for a in answers)
    assert console.outside.read_text() == "tools: []\n"


@pytest.mark.parametrize("name", ["a" * 300 + ".yaml", "d" * 250 + "/x.yaml", "\u202ex.yaml", "x\u0007.yaml",
                                  "x\u200b.yaml"])
def test_names_the_file_system_or_a_reader_cannot_take_are_a_400(console, name):
    """A name longer than the file system allows (it was a 500), or holding control or invisible format
    characters (a right-to-left override shows another name than the one saved), is a 400 naming the path."""
    with httpx.Client(base_url=console.url, timeout=30, auth=CONSOLE) as http:
        answers = [http.get(f"/admin/api/files/{quote(name)}"),
                   http.put(f"/admin/api/files/{quote(name)}", json={"text": "tools: []\n", "base_sha256": "0" * 64}),
                   http.post("/admin/api/files", json={"path": name, "template": "python"})]
    assert [a.status_code for a in answers] == [400, 400, 400], [(a.status_code, a.text[:200]) for a in answers]


async def test_two_saves_from_the_same_base_one_wins(console):
    """Two saves racing from the same base sha256: exactly one is saved, the other is a 409, and the file holds
    the winner's text."""
    async with httpx.AsyncClient(base_url=console.url, timeout=60, auth=CONSOLE) as http:
        opened = (await http.get("/admin/api/files/tools.yaml")).json()
        texts = [opened["text"].replace("Says the text back.", f"Edit {n}.") for n in range(2)]
        answers = await asyncio.gather(*(http.put("/admin/api/files/tools.yaml",
                                                  json={"text": text, "base_sha256": opened["sha256"]})
                                         for text in texts))
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    winner = texts[[a.status_code for a in answers].index(200)]
    assert (console.root / "tools.yaml").read_text() == winner


def test_a_yaml_bomb_draft_is_a_problem_not_a_hang(console):
    """A billion-laughs draft is checked and refused with a problem (the YAML budget), never built."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))
    answer = httpx.post(f"{console.url}/admin/api/check", json={"path": "tools.yaml", "text": bomb}, timeout=60,
                        auth=CONSOLE)
    assert answer.status_code == 200 and answer.json()["ok"] is False, answer.text


def test_huge_arguments_are_cut_in_the_call_detail_and_a_secret_is_never_shown_even_cut(console):
    """A call with a megabyte of arguments is kept cut to the cap; a secret the gateway knows, in the
    arguments, is never shown in the call detail, whole or as the start the cut left."""
    with httpx.Client(base_url=console.url, timeout=30, auth=CONSOLE) as http:
        for cut in (0, 6, 12):
            # JSON `{"text": "...` then the secret, cut `cut` characters before its end
            padding = live.TEXT_CAP - len('{"text": "') - len(SECRET) + cut
            called = http.post("/tools/echo/call", json={"text": "p" * padding + SECRET + "q" * 1_000_000})
            assert called.status_code == 200
            [recent] = [c for c in http.get("/admin/api/calls").json()["calls"] if c["tool"] == "echo"][:1]
            detail = http.get(f"/admin/api/calls/{recent['id']}").json()
            assert detail["arguments_truncated"] and len(detail["arguments"]) <= live.TEXT_CAP + 100
            shown = json.dumps(detail)
            assert SECRET[:8] not in shown, (cut, detail["arguments"][-40:])


def test_the_tool_detail_shows_the_template_never_the_secret(console):
    """The console's tool detail summarises a binding as written: the template naming the secret, never its
    value."""
    detail = httpx.get(f"{console.url}/admin/api/tools/keyed", timeout=30).json()
    assert SECRET not in json.dumps(detail) and SECRET[:8] not in json.dumps(detail)


async def test_a_live_reader_that_never_reads_costs_a_bounded_queue(console):
    """A live-stream reader that opens the stream and never reads while calls with 200 KB arguments end: the
    calls go on answering (the reader's queue is bounded and drops, it never blocks a call) and the recent calls
    kept stay within KEPT."""
    async with httpx.AsyncClient(base_url=console.url, timeout=60, auth=CONSOLE) as http, \
            http.stream("GET", "/admin/api/calls/stream") as stalled:
        assert stalled.status_code == 200
        big = "z" * 200_000
        for _ in range(3):
            answers = await asyncio.gather(*(http.post("/tools/echo/call", json={"text": big})
                                             for _ in range(live.QUEUE_SIZE // 2)))
            assert all(a.status_code == 200 for a in answers)
        calls = (await http.get("/admin/api/calls")).json()["calls"]
        assert len(calls) <= live.KEPT


def test_a_draft_importing_a_hanging_module_is_checked_within_the_budget(console, tmp_path):
    """A draft whose tool imports a module that hangs at import answers with a problem (import_timeout_s), and
    the next check of a good draft still answers: the checker is not wedged."""
    (console.root / "python" / "hangs.py").write_text("import time\ntime.sleep(3600)\n\ndef run() -> str:\n"
                                                     "    return 'never'\n")
    draft = TOOLS + ("  - id: hung\n    name: Hung\n    user_description: Hangs.\n    ai_description: Hangs.\n"
                     "    binding: {python: 'hangs:run'}\n")
    with httpx.Client(base_url=console.url, timeout=120, auth=CONSOLE) as http:
        hung = http.post("/admin/api/check", json={"path": "tools.yaml", "text": draft})
        assert hung.status_code == 200 and hung.json()["ok"] is False, hung.text
        assert any("hangs" in p["message"] for p in hung.json()["problems"]), hung.text
        good = http.post("/admin/api/check", json={"path": "tools.yaml", "text": TOOLS})
        assert good.status_code == 200 and good.json()["ok"] is True, good.text


def test_a_new_files_path_is_never_code_in_the_module_made_for_it(console, tmp_path, monkeypatch):
    """Creating a definitions file whose name closes the generated module's docstring (`\"\"\"; open(...)`)
    makes a module that only names it: the gateway imports it on the reload, and nothing in the name runs."""
    monkeypatch.chdir(tmp_path)
    path = 'x"""; open("pwned", "w").write("ran"); """.yaml'
    made = httpx.post(f"{console.url}/admin/api/files", json={"path": path, "template": "python"}, timeout=60,
                      auth=CONSOLE)
    assert made.status_code == 201 and made.json()["reload"]["ok"], made.text
    assert not (tmp_path / "pwned").exists()
    [module] = (console.root / "python").glob("x*_tool.py")
    assert path in ast.get_docstring(ast.parse(module.read_text()))
