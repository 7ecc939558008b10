"""Real upstream MCP servers for the tests (import as ``from mcp_upstreams import ...``): each a process of its own
on 127.0.0.1, killed and restarted on the same port when a test says so."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# until, until_async and gateway_serving (support.running) are imported from here by the sources and adversarial tests
from support import FIXTURES, free_port, until, until_async  # noqa: F401
from support import running as gateway_serving  # noqa: F401

SERVERS = FIXTURES / "mcp_upstream"
STDIO_SERVER = SERVERS / "stdio_server.py"
# What content_http.py's tools read as: gallery's blocks (note "sunny") one line each, read_file's file.
GALLERY_TEXT = ("caption: sunny\n[image: image/png, 68 bytes]\n[audio: audio/wav, 44 bytes]\nnotes: sunny\n"
                "[resource file:///data.bin: application/octet-stream, 10 bytes]\n"
                "[resource report: file:///report.pdf]\nthe end")
FILE_TEXT = "hello from fs\n"


@dataclass
class Upstream:
    """An upstream MCP server script run on a fixed port of 127.0.0.1."""

    script: str
    args: tuple[str, ...] = ()  # after the port: ("--legacy",) for a server of the 2025-11-25 revision only
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> Upstream:
        self.process = subprocess.Popen([sys.executable, str(SERVERS / self.script), str(self.port), *self.args],
                                        env={**os.environ, **self.env}, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, f"{self.script} exited with {self.process.returncode}"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            assert time.monotonic() < deadline, f"{self.script} did not listen on {self.port}"
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@contextmanager
def upstream(script: str, *args: str, **env: str) -> Iterator[Upstream]:
    running = Upstream(script, args, env=env).start()
    try:
        yield running
    finally:
        running.kill()


def sources_yaml(*entries: str) -> str:
    return "sources:\n" + "".join(entries)


def http_source(source: str, url: str, extra: str = "") -> str:
    return f"  - id: {source}\n    mcp: {{url: '{url}', connect_timeout_s: 3{extra}}}\n"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child that exited but was not reaped yet is a zombie: gone for every purpose here.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
