"""The example plugin, built as a wheel and installed beside the gateway, is served; its upgrade after a reload."""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import REPO, free_port

ADMIN_KEY = "plugin-test-admin-key"
HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}"}


def build_wheel(source: Path, out: Path) -> Path:
    out.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-w", str(out), "-q"],
                   check=True, timeout=300, capture_output=True)
    return next(out.glob("*.whl"))


@pytest.fixture
def venv_python(tmp_path: Path) -> Path:
    """A fresh virtual environment that sees the gateway's dependencies: those of the interpreter running the tests,
    named in a .pth file (``--system-site-packages`` would see the base interpreter's, which lacks them when the
    tests themselves run in a virtual environment)."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=120)
    python = tmp_path / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, timeout=60, capture_output=True, text=True).stdout.strip()
    Path(purelib, "tests-parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


@pytest.fixture
def serving(venv_python: Path, tmp_path: Path) -> Iterator[httpx.Client]:
    """`serve` run by the venv's Python from this checkout's source, with `plugins: [example]`."""
    definitions = tmp_path / "defs"
    definitions.mkdir()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOOL_GATEWAY_PLUGINS": "example",
           "TOOL_GATEWAY_ADMIN_KEY": ADMIN_KEY}
    env.pop("TOOL_GATEWAY_SETTINGS", None)

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(venv_python), "-m", "gateway", "serve", str(definitions), "--port", str(port), "--no-reload"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=HEADERS, timeout=30)
    client.start = start  # type: ignore[attr-defined]
    client.process = None  # type: ignore[attr-defined]
    yield client
    process = client.process  # type: ignore[attr-defined]
    if process is not None:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
    client.close()


def wait_ready(client: httpx.Client) -> None:
    process = client.process  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            client.get("/healthz", timeout=1)
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)


def install(python: Path, wheel: Path) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--upgrade", "-q", str(wheel)],
                   check=True, timeout=300, capture_output=True)


def test_example_plugin_wheel_is_served_and_its_upgrade_after_a_reload(venv_python, serving, tmp_path):
    """The example plugin installed from its wheel is served with `plugins: [example]`; after `pip install -U`
    of a newer wheel, POST /admin/reload serves the changed and the added tool, and /status names the version."""
    install(venv_python, build_wheel(REPO / "examples" / "plugin", tmp_path / "wheel1"))
    serving.process = serving.start()
    wait_ready(serving)
    status = serving.get("/status").json()
    assert status["plugins"] == [{"name": "example", "distribution": "tool-gateway-example-plugin",
                                  "version": "1.0.0"}]
    answer = serving.post("/tools/example_greet/call", json={"name": "Ada"}).json()
    assert answer["is_error"] is False and "Hello, Ada!" in str(answer)

    upgraded = tmp_path / "plugin-1.1"
    shutil.copytree(REPO / "examples" / "plugin", upgraded, ignore=shutil.ignore_patterns("__pycache__", "build"))
    pyproject = upgraded / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    module = upgraded / "src" / "tool_gateway_example_plugin" / "tools" / "python" / "greetings.py"
    module.write_text(module.read_text().replace('f"Hello, {name}!"', 'f"Good day, {name}!"')
                      + "\n\ndef whisper(text: str) -> str:\n    return text.lower()\n")
    yaml_file = module.parent.parent / "greetings.yaml"
    yaml_file.write_text(yaml_file.read_text() + """  - id: example_whisper
    name: Whisper
    user_description: Repeats a text in small letters.
    ai_description: Return the text in lower case.
    binding:
      python: greetings:whisper
""")
    install(venv_python, build_wheel(upgraded, tmp_path / "wheel2"))
    reloaded = serving.post("/admin/reload").json()
    assert reloaded["ok"] is True and reloaded["changed"] is True, reloaded
    assert reloaded["version"] != status["version"]
    assert serving.get("/status").json()["plugins"][0]["version"] == "1.1.0"
    answer = serving.post("/tools/example_greet/call", json={"name": "Ada"}).json()
    assert "Good day, Ada!" in str(answer), answer
    answer = serving.post("/tools/example_whisper/call", json={"text": "QUIET"}).json()
    assert answer["is_error"] is False and "quiet" in str(answer), answer
