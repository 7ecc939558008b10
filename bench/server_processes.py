"""The benchmarks' server processes: a free port of 127.0.0.1, ``tool-gateway serve`` in a child process, waiting
until a server listens or answers, the CPU seconds it has used, and stopping it.

Every server a bench measures (a gateway, an upstream, a bare baseline) runs in a process of its own, so that the
CPU it spends is its own (read from /proc) and the load generator never shares its interpreter.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# uvicorn as ``pip install uvicorn`` runs it, h11 and asyncio, whatever else is installed here (the gateway brings
# httptools and uvloop, which uvicorn's "auto" would take): the bare baselines and the upstreams keep the
# configuration the issues measured them on, so that a figure moves only when the gateway does.
PLAIN_UVICORN = {"http": "h11", "loop": "asyncio"}
_PLAIN_LAUNCHER = ("import functools, os, runpy, sys, uvicorn; "
                   "uvicorn.run = functools.partial(uvicorn.run, http='h11', loop='asyncio'); "
                   "sys.argv = sys.argv[1:]; sys.path.insert(0, os.path.dirname(sys.argv[0])); "
                   "runpy.run_path(sys.argv[0], run_name='__main__')")


def plain_uvicorn(script: Path | str, *args: str) -> list[str]:
    """The command that runs ``script`` (which serves with ``uvicorn.run``) on PLAIN_UVICORN."""
    return [sys.executable, "-c", _PLAIN_LAUNCHER, str(script), *args]


def free_port() -> int:
    """A port of 127.0.0.1 free now (for a child process to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn_gateway(definitions: Path, port: int, *args: str, **popen: Any) -> subprocess.Popen:
    """``tool-gateway serve <definitions> --port <port> <args>``, without waiting for it; its output is dropped
    unless ``popen`` (``subprocess.Popen``'s keywords) routes it. It runs as ``python -m gateway``, which imports
    the package of its working directory first: ``cwd`` picks the source tree that serves."""
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return subprocess.Popen([sys.executable, "-m", "gateway", "serve", str(definitions), "--port", str(port), *args],
                            **(streams | popen))


def wait_listening(process: subprocess.Popen, port: int, what: str, timeout_s: float = 30) -> None:
    """Return once ``process`` accepts connections on ``port`` of 127.0.0.1; end the run naming ``what`` if it
    exits first or is not up within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.05)


def wait_healthy(url: str, process: subprocess.Popen, what: str, *, timeout_s: float = 60, poll_s: float = 0.05,
                 request_timeout_s: float = 5, log: Path | None = None) -> float:
    """Poll ``GET url`` every ``poll_s`` until it answers 200; the ``time.perf_counter()`` of that answer, so that
    a start-up can be timed to it. End the run naming ``what`` (and showing ``log``, the server's output) if the
    process exits first or does not answer within ``timeout_s`` (``math.inf``: wait as long as it takes)."""
    import httpx  # here: bench_serving's servers and load generator import this module, and never this client

    deadline = time.monotonic() + timeout_s
    # One client for every poll: httpx.get makes a client (and its TLS context, ~10 ms of CPU) per call, which
    # polling every 10 ms turned into a core taken from the server on a 2-core machine.
    with httpx.Client(timeout=request_timeout_s) as client:
        while True:
            if process.poll() is not None:
                said = f":\n{log.read_text(errors='replace')}" if log else ""
                raise SystemExit(f"{what} exited with {process.returncode}{said}")
            try:
                if client.get(url).status_code == 200:
                    return time.perf_counter()
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not answer {url} within {timeout_s:g} s")
            time.sleep(poll_s)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a running process has used (from /proc): what it spent, whatever else the
    machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def stop(*processes: subprocess.Popen, timeout_s: float = 30, kill: bool = False) -> None:
    """Stop each process in turn, the next only once the last has exited: SIGTERM (a graceful stop), or SIGKILL
    with ``kill`` (for a server whose open calls or streams would hold a graceful stop, which measures nothing)."""
    for process in processes:
        if kill:
            process.kill()
        else:
            process.terminate()
        process.wait(timeout_s)


class ServedHere:
    """A helper server that is not measured (an issuer's keys, a trace receiver): an ASGI app served by uvicorn in
    a thread of the bench's own process, on a free port of 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        import threading

        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
{headers}
"""
# Several bodies: each connection sends them in turn (the pages of one listing, say).
WRK_BODIES = """
bodies = {{{bodies}}}
turn = 0
request = function()
  turn = turn % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[turn])
end
"""


def wrk_run(url: str, body: dict | list[dict], headers: dict[str, str], duration: float, tmp: Path
            ) -> dict[str, float]:
    """One wrk round of ``duration`` seconds: POST ``body`` as JSON to ``url`` (a list: each body in turn), one
    thread, 16 connections, wrk pinned to the last CPU. Requests answered, p50 and p99 latency (ms), and failures
    (answers not 2xx or 3xx, and socket errors: connect, read, write, timeout)."""
    script = tmp / "wrk.lua"
    lines = "\n".join(f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items())
    bodies = body if isinstance(body, list) else [body]
    text = WRK_SCRIPT.format(body=json.dumps(json.dumps(bodies[0])), headers=lines)
    if len(bodies) > 1:
        text += WRK_BODIES.format(bodies=", ".join(json.dumps(json.dumps(b)) for b in bodies))
    script.write_text(text)
    cpus = sorted(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cpus[-1])] if len(cpus) > 1 and shutil.which("taskset") else []
    out = subprocess.run([*pin, "wrk", "-t1", "-c16", f"-d{duration:g}s", "--latency", "-s", str(script), url],
                         check=True, capture_output=True, text=True).stdout
    failed = sum(int(n) for n in re.findall(r"(?:Non-2xx or 3xx responses|connect|read|write|timeout):? (\d+)", out))
    return {"requests": int(re.search(r"(\d+) requests in", out).group(1)), "failures": failed,
            "p50_ms": _latency(out, "50%"), "p99_ms": _latency(out, "99%")}


def _latency(out: str, percentile: str) -> float:
    found = re.search(rf"{percentile}\s+([\d.]+)(us|ms|s)", out)
    if not found:
        return float("nan")
    return float(found.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[found.group(2)]


def wrk_requests(port: int, path: str, body: dict, headers: dict[str, str], duration: float, tmp: Path) -> int:
    """Requests answered in one ``wrk_run`` round on 127.0.0.1:``port``; any failure ends the run."""
    run = wrk_run(f"http://127.0.0.1:{port}{path}", body, headers, duration, tmp)
    if run["failures"]:
        raise SystemExit(f"{run['failures']} failed requests to {path}")
    return int(run["requests"])
