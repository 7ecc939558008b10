"""The console's editor on a real server: listing and opening definitions files, checking drafts in memory,
saving only whole-catalog-good content over the version opened, creating files, and refusing what it must."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from support import CONSOLE, EXAMPLES

from gateway.events import Event, Observer
from gateway.server.admin.files import DefinitionsFiles

SUM_LINE = "  - id: sum"


@pytest.fixture
def definitions(examples_dir: Path) -> Path:
    """A private copy of the shipped examples (a test may change it)."""
    return examples_dir


@pytest.fixture
def served(start_server, definitions):
    return start_server(definitions)


@pytest.fixture
def client(served):
    with httpx.Client(base_url=served.url, timeout=60, auth=CONSOLE) as client:
        yield client


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_files_are_listed_with_size_and_digest(client, definitions):
    """Every YAML file the loader reads is listed by its path below the directory, with its size and sha256."""
    listing = client.get("/admin/api/files").json()
    assert listing["read_only"] is False and listing["read_only_reason"] is None
    files = {f["path"]: f for f in listing["files"]}
    assert set(files) == {p.name for p in definitions.glob("*.yaml")}
    assert files["math.yaml"] == {"path": "math.yaml", "bytes": (definitions / "math.yaml").stat().st_size,
                                  "sha256": digest(definitions / "math.yaml")}


def test_a_file_is_opened_with_its_digest(client, definitions):
    """Opening a file gives its text and the sha256 a later save names as its base."""
    opened = client.get("/admin/api/files/math.yaml").json()
    assert opened == {"path": "math.yaml", "text": (definitions / "math.yaml").read_text(),
                      "sha256": digest(definitions / "math.yaml")}
    assert client.get("/admin/api/files/absent.yaml").status_code == 404


def test_checking_a_broken_draft_reports_its_lines_and_writes_nothing(client, served, definitions):
    """A draft with a duplicate id and a bad binding is checked with every other file: each problem has its
    file and line, the file on disk is untouched and the served catalog unchanged."""
    before, version = digest(definitions / "math.yaml"), served.gateway.catalog.version
    text = (definitions / "math.yaml").read_text()
    draft = text.replace("id: sum", "id: get_time").replace("math_tools:add", "math_tools:nothing_here")
    checked = client.post("/admin/api/check", json={"path": "math.yaml", "text": draft}).json()
    assert checked["ok"] is False
    lines = draft.splitlines()
    by_message = {p["message"]: p for p in checked["problems"]}
    duplicate = next(m for m in by_message if "duplicate tool id 'get_time'" in m)  # reported where it comes 2nd
    line = int(duplicate.split("math.yaml:")[1].split(":")[0])
    assert lines[line - 1].strip() == "- id: get_time"
    binding = next(p for m, p in by_message.items() if "nothing_here" in m)
    assert "math_tools:nothing_here" in lines[binding["line"] - 1]
    assert digest(definitions / "math.yaml") == before and served.gateway.catalog.version == version
    good = client.post("/admin/api/check", json={"path": "math.yaml", "text": text}).json()
    assert good == {"ok": True, "problems": []}


def test_a_save_over_a_file_changed_on_disk_is_refused(client, definitions):
    """A save whose base sha256 is not what the file holds now (someone changed it since it was opened) is a 409,
    and the other edit is kept."""
    opened = client.get("/admin/api/files/math.yaml").json()
    theirs = opened["text"].replace("Adds two numbers.", "Adds two numbers (their edit).")
    (definitions / "math.yaml").write_text(theirs)
    mine = opened["text"].replace("Adds two numbers.", "Adds two numbers (my edit).")
    refused = client.put("/admin/api/files/math.yaml", json={"text": mine, "base_sha256": opened["sha256"]})
    assert refused.status_code == 409 and "changed on disk" in refused.json()["error"]
    assert (definitions / "math.yaml").read_text() == theirs


def test_a_save_that_breaks_the_catalog_is_refused(client, served, definitions):
    """A save that would not build is a 422 with the problems; the file and the catalog are unchanged."""
    opened = client.get("/admin/api/files/math.yaml").json()
    broken = opened["text"].replace("id: sum", "id: square_root")
    refused = client.put("/admin/api/files/math.yaml", json={"text": broken, "base_sha256": opened["sha256"]})
    assert refused.status_code == 422
    body = refused.json()
    assert body["status"] == 422 and any("duplicate" in p["message"] for p in body["problems"])
    assert (definitions / "math.yaml").read_text() == opened["text"]
    assert "sum" in served.gateway.catalog.tools


def test_a_good_save_is_written_and_served(client, definitions):
    """A good save replaces the file (keeping its mode), reloads, and the change is served at once; the answer
    gives the new digest and the reload's outcome."""
    os.chmod(definitions / "math.yaml", 0o640)
    opened = client.get("/admin/api/files/math.yaml").json()
    text = opened["text"].replace("Adds two numbers.", "Adds two numbers exactly.")
    saved = client.put("/admin/api/files/math.yaml", json={"text": text, "base_sha256": opened["sha256"]})
    assert saved.status_code == 200
    body = saved.json()
    assert body["ok"] is True and body["reload"]["ok"] is True and body["reload"]["changed"] is True
    assert body["sha256"] == digest(definitions / "math.yaml") and (definitions / "math.yaml").read_text() == text
    assert (definitions / "math.yaml").stat().st_mode & 0o777 == 0o640
    assert client.get("/tools/sum").json()["user_description"] == "Adds two numbers exactly."
    assert not [p for p in definitions.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_edits_are_admin_events_without_the_text(client, served):
    """A save and a creation are each told as an `admin` event with the path and digest, never the file's text."""
    seen: list[Event] = []

    class Recorder(Observer):
        def event(self, event: Event) -> None:
            seen.append(event)

    served.gateway.events.subscribe(Recorder())
    opened = client.get("/admin/api/files/math.yaml").json()
    text = opened["text"].replace("Adds two numbers.", "Adds two numbers (zebra).")
    assert client.put("/admin/api/files/math.yaml", json={"text": text, "base_sha256": opened["sha256"]}).is_success
    assert client.post("/admin/api/files", json={"path": "fresh.yaml", "template": "empty"}).status_code == 201
    admin = [event.data for event in seen if event.kind == "admin"]
    assert [(data["action"], data["detail"]["path"]) for data in admin] == [("edit", "math.yaml"),
                                                                             ("create", "fresh.yaml")]
    assert admin[0]["detail"]["base_sha256"] == opened["sha256"] and "zebra" not in repr(admin)


@pytest.mark.parametrize("template", ["http", "python", "empty"])
def test_a_new_file_from_each_template_is_served(client, definitions, template):
    """Each template makes a file (and, for python, its module) whose tool is served after the reload; creating it
    again is a 409."""
    created = client.post("/admin/api/files", json={"path": f"my-{template}.yaml", "template": template})
    assert created.status_code == 201, created.text
    assert created.json()["reload"]["ok"] is True
    assert created.json()["sha256"] == digest(definitions / f"my-{template}.yaml")
    tools = {tool["id"] for tool in client.get("/tools").json()["tools"]}
    assert (f"my_{template}" in tools) is (template != "empty")
    again = client.post("/admin/api/files", json={"path": f"my-{template}.yaml", "template": template})
    assert again.status_code == 409


def test_an_unknown_template_is_a_400(client):
    """A template that does not exist is refused, naming the ones that do."""
    answer = client.post("/admin/api/files", json={"path": "x.yaml", "template": "ruby"})
    assert answer.status_code == 400 and "http, python, empty" in answer.json()["error"]


@pytest.mark.parametrize("path", ["../outside.yaml", "sub/../../outside.yaml", "/etc/passwd.yaml", ".hidden.yaml",
                                  "a\\b.yaml", "python/math_tools.py", "./math.yaml", "math.yaml/", "a//b.yaml"])
def test_paths_outside_the_rules_are_refused_everywhere(client, definitions, path):
    """A path that is absolute, climbs out, is hidden, is not YAML or is not plain is refused when opening,
    checking, saving and creating; nothing is written."""
    before = sorted(p.name for p in definitions.parent.rglob("*"))
    in_url = quote(path, safe="")  # as sent, not normalised by the client: the server sees the path as given
    answers = [
        client.get(f"/admin/api/files/{in_url}"),
        client.post("/admin/api/check", json={"path": path, "text": "tools: []\n"}),
        client.put(f"/admin/api/files/{in_url}", json={"text": "tools: []\n", "base_sha256": "x"}),
        client.post("/admin/api/files", json={"path": path, "template": "empty"}),
    ]
    for answer in answers:
        assert answer.status_code in (400, 403, 404), (answer.request.url, answer.status_code)
        assert answer.json()["status"] == answer.status_code
    assert sorted(p.name for p in definitions.parent.rglob("*")) == before


def test_a_link_out_of_the_directory_is_refused(client, definitions, tmp_path):
    """A YAML file linked from outside the definitions directory is neither opened nor written through."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("tools: []\n")
    (definitions / "linked.yaml").symlink_to(outside)
    assert client.get("/admin/api/files/linked.yaml").status_code == 403
    answer = client.put("/admin/api/files/linked.yaml",
                        json={"text": "tools: []\n# changed\n", "base_sha256": digest(outside)})
    assert answer.status_code == 403 and outside.read_text() == "tools: []\n"
    assert "linked.yaml" not in {f["path"] for f in client.get("/admin/api/files").json()["files"]}


def test_a_configmap_mount_is_read_only(start_server, tmp_path):
    """A directory laid out as Kubernetes mounts a ConfigMap (files linked through `..data`) is read-only: the
    listing says why, saves and creations are 403 saying 'read-only', opening and checking still work."""
    root = tmp_path / "mounted"
    stamp = root / "..2026_11_30_13_00_00.000000001"
    stamp.mkdir(parents=True)
    (stamp / "math.yaml").write_text((EXAMPLES / "math.yaml").read_text())
    shutil.copytree(EXAMPLES / "python", stamp / "python", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "..data").symlink_to(stamp.name)
    (root / "math.yaml").symlink_to("..data/math.yaml")
    (root / "python").symlink_to("..data/python")
    served = start_server(root)
    with httpx.Client(base_url=served.url, timeout=60, auth=CONSOLE) as client:
        listing = client.get("/admin/api/files").json()
        assert listing["read_only"] is True and "ConfigMap" in listing["read_only_reason"]
        assert [f["path"] for f in listing["files"]] == ["math.yaml"]
        assert client.get("/admin/api/overview").json()["read_only"] is True
        opened = client.get("/admin/api/files/math.yaml").json()
        assert client.post("/admin/api/check", json={"path": "math.yaml", "text": opened["text"]}).json()["ok"]
        save = client.put("/admin/api/files/math.yaml", json={"text": "tools: []\n", "base_sha256": opened["sha256"]})
        create = client.post("/admin/api/files", json={"path": "new.yaml", "template": "empty"})
        for refused in (save, create):
            assert refused.status_code == 403 and "read-only" in refused.json()["error"]
    assert (stamp / "math.yaml").read_text() == opened["text"] and not (root / "new.yaml").exists()


def test_a_directory_the_process_may_not_write_is_read_only(tmp_path, monkeypatch):
    """Without write access to the directory (``os.access``; tests run as root, who may write anywhere, so the
    answer is arranged), the editor is read-only and says the directory is not writable."""
    files = DefinitionsFiles(tmp_path, 1_000)
    assert files.read_only_reason() is None
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    assert "not writable" in files.read_only_reason()


def test_a_draft_over_the_file_size_limit_is_refused(start_server, definitions):
    """A draft larger than max_file_bytes is a 413 for check and save: no larger file than the loader reads."""
    served = start_server(definitions, max_file_bytes=20_000)
    with httpx.Client(base_url=served.url, timeout=60, auth=CONSOLE) as client:
        opened = client.get("/admin/api/files/math.yaml").json()
        big = opened["text"] + "#" * 20_001 + "\n"
        assert client.post("/admin/api/check", json={"path": "math.yaml", "text": big}).status_code == 413
        assert client.put("/admin/api/files/math.yaml",
                          json={"text": big, "base_sha256": opened["sha256"]}).status_code == 413
        huge = client.post("/admin/api/check", content=b'{"path": "math.yaml", "text": "' + b"#" * 200_000 + b'"}',
                           headers={"Content-Type": "application/json"})
        assert huge.status_code == 413


def test_malformed_editor_requests_are_400(client):
    """A body that is not a JSON object with the fields of the request, of their types, is a 400."""
    for body in (b"[]", b'{"path": 1, "text": "x"}', b'{"path": "math.yaml"}', b"not json"):
        answer = client.post("/admin/api/check", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400 and answer.json()["status"] == 400, body


def test_a_check_that_runs_out_of_time_is_a_problem_and_the_next_check_works(start_server, definitions):
    """A draft whose build outlasts reload_timeout_s (a module that takes long to import) is answered with a
    'timed out' problem instead of holding the request; the next check is answered as usual."""
    (definitions / "python" / "slow_import.py").write_text(
        "import time\ntime.sleep(8)\n\n\ndef run(text: str) -> str:\n    \"\"\"Echo.\"\"\"\n    return text\n")
    served = start_server(definitions, reload_timeout_s=3.0, import_timeout_s=20.0)
    text = (definitions / "math.yaml").read_text()
    slow = text.replace("math_tools:add", "slow_import:run")
    with httpx.Client(base_url=served.url, timeout=60, auth=CONSOLE) as client:
        checked = client.post("/admin/api/check", json={"path": "math.yaml", "text": slow}).json()
        assert checked["ok"] is False and "timed out" in checked["problems"][0]["message"]
        assert client.post("/admin/api/check", json={"path": "math.yaml", "text": text}).json()["ok"] is True
