"""The federation under test: every upstream of ``matrix.PEERS`` that is installed, started side by side (an HTTP one
behind a counting proxy, a stdio one behind ``stdio_counter.py``), answered once directly by the official ``mcp``
client, and one gateway (served in this process) with each declared as a ``sources:`` entry; and the restart of
each, through a gateway of its own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from counting_proxy import CountingProxy
from matrix import CHECKS, PEERS, Peer, filled, prepare
from mcp import Client, StdioServerParameters
from support import RunningServer, free_port, running, until

STDIO_COUNTER = Path(__file__).resolve().parent / "stdio_counter.py"
START_S = 60  # how long an upstream may take to listen: a bound on a loaded machine, not a measure
# What this session's run found (recorded by the conftest and test_idle.py, read by the table and the summary):
# check -> outcome per upstream key, the revision each settled on, what each was sent while the gateway idled.
OUTCOMES: dict[str, dict[str, str]] = {}
REVISIONS: dict[str, str] = {}
IDLE: dict[str, list[str]] = {}
RESTART_TRIES = 3  # restarts the gateway heard of otherwise than by the call (a keep-alive meanwhile) before giving up


def dumped(result: Any) -> dict[str, Any]:
    """What the matrix compares of a tools/call result: its blocks, structuredContent and isError, as JSON."""
    return {"content": [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content],
            "structuredContent": result.structured_content, "isError": bool(result.is_error)}


def listed(tool: Any) -> dict[str, Any]:
    """What the matrix compares of a listed tool."""
    return {"description": tool.description, "inputSchema": tool.input_schema, "outputSchema": tool.output_schema}


@dataclass
class Direct:
    """An upstream as the official client sees it, straight: the revision it settled on, its tools, its answers."""

    revision: str
    tools: dict[str, dict[str, Any]]
    answers: list[dict[str, Any]]


@dataclass
class Running:
    """One started upstream."""

    peer: Peer
    values: dict[str, str]  # the placeholders: port, files, memory
    log: Path
    process: subprocess.Popen[bytes] | None = None  # an HTTP upstream (a stdio one is the gateway's child)
    proxy: CountingProxy | None = None
    direct: Direct | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.values["port"])

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(tool, filled(arguments, **self.values)) for tool, arguments in self.peer.calls]

    @property
    def env(self) -> dict[str, str]:
        return {name: value.format(**self.values) for name, value in self.peer.env.items()}

    def spawn(self) -> None:
        with self.log.open("wb") as out:  # this start's output alone (the port taken, or why it failed)
            self.process = subprocess.Popen(self.peer.argv(**self.values), stdout=out, stderr=subprocess.STDOUT,
                                            env={**os.environ, **self.env})

    def listening(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None and "address already in use" in self.log.read_text().lower():
            # Another process (of this machine's other test runs) took the free port first: take another.
            self.values["port"] = str(free_port())
            self.spawn()
            return False
        assert self.process.poll() is None, f"{self.peer.key} exited at start:\n{self.log.read_text()[-3000:]}"
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def wait_listening(self) -> None:
        deadline = time.monotonic() + START_S
        while not self.listening():
            assert time.monotonic() < deadline, f"{self.peer.key} did not listen in {START_S} s"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    # What the upstream was sent through the gateway: counted by the proxy or by stdio_counter.py.
    @property
    def counter_log(self) -> Path:
        return self.log.with_suffix(".sent")

    def wrapped(self, log: Path) -> list[str]:
        """The stdio upstream's command line behind ``stdio_counter.py`` writing to ``log``."""
        return [sys.executable, str(STDIO_COUNTER), str(log), "--", *self.peer.argv(**self.values)]

    def sent(self) -> list[str]:
        """What the matrix's gateway sent the upstream."""
        if self.proxy is not None:
            return [method or verb for verb, method in self.proxy.seen]
        return self.counter_log.read_text().splitlines() if self.counter_log.exists() else []

    def restarted(self, directory: Path) -> dict[str, Any]:
        """Through a gateway of its own (declaring this upstream alone, in ``directory``), connected and serving its
        tools: kill the upstream (SIGKILL, as a crash), start it again, call it once through REST; the answer.

        An HTTP upstream is started again on the same port and called as soon as it listens: a session the restarted
        server does not know must be renewed and the call sent again. A stdio upstream is spawned again by the
        gateway, which sees its stdio close, and called once it is. Its own gateway, not the matrix's: another
        upstream's restart (a rebuild, listing every source again) would tell the matrix's gateway of this one; and
        a restart that the gateway heard of otherwise than by the call (a keep-alive sent meanwhile, on a loaded
        machine) is done again, so that the outcome does not depend on the machine's speed: the proxy holds the
        session's change stream open meanwhile, and the gateway must have sent the upstream nothing before the
        call. When every try was heard of so, the last one's call is made once the gateway's session healed by
        itself."""
        (directory / "defs").mkdir(parents=True)
        for _ in range(RESTART_TRIES):
            proxy = CountingProxy(self.port) if self.proxy is not None else None
            try:
                answer, quiet = self._restart_once(directory, proxy)
            finally:
                if proxy is not None:
                    proxy.close()
            if quiet:
                break
        return answer

    def _restart_once(self, directory: Path, proxy: CountingProxy | None) -> tuple[dict[str, Any], bool]:
        log = directory / "restart.sent"
        (directory / "defs" / f"{self.peer.key}.yaml").write_text("sources:\n" + self.source(log, proxy))
        tool, arguments = self.calls[0]
        with running(directory / "defs") as served, httpx.Client(base_url=served.url, timeout=60) as http:
            connection = served.gateway.mcp_pool.connections()[0]
            until(lambda: connection.state == "up", f"a gateway connected to {self.peer.key}", timeout=START_S)
            # Serving its tools, not only connected: on a loaded machine the first build may give up on a slow
            # upstream (the upstream was not read within SOURCES_WAIT_S) and serve none of them; they come with the
            # rebuild the session's connect asks for. Killed before then, the upstream was never served, its tool
            # was unknown before the restart and may still be after it (404, not a tool result).
            until(lambda: f"{self.peer.key}_{tool}" in served.gateway.catalog.tools,
                  f"the gateway to serve {self.peer.key}'s tools", timeout=START_S)
            http.post(f"/tools/{self.peer.key}_{tool}/call", json=arguments)  # serving calls, as a gateway does
            if proxy is not None:
                before, proxy.holding, connected_at = len(proxy.seen), True, connection.connected_at
                self.stop()
                self.spawn()
                self.wait_listening()
                # Started on another port when its own was taken meanwhile (``listening``): the proxies follow it.
                proxy.upstream_port = self.port
                if self.proxy is not None:
                    self.proxy.upstream_port = self.port
                quiet = len(proxy.seen) == before
                if not quiet:
                    # The gateway heard of the restart before the call (it tried the upstream while it was down):
                    # its session heals by itself, and the call is made once it has — not at a moment its backoff
                    # happens to be at, which a loaded machine's speed would decide.
                    deadline = time.monotonic() + START_S
                    while time.monotonic() < deadline and not (
                            connection.state == "up" and connection.connected_at != connected_at):
                        time.sleep(0.05)
            else:
                connected_at = connection.connected_at
                for pid in Path(f"{log}.pids").read_text().split():
                    with contextlib.suppress(ProcessLookupError):  # one that already ended
                        os.kill(int(pid), signal.SIGKILL)
                until(lambda: connection.state == "up" and connection.connected_at != connected_at,
                      f"the gateway to spawn {self.peer.key} again", timeout=START_S)
                quiet = True
            # On a connection of its own: the first call's, idle through the restart, may be closed by the gateway's
            # keep-alive timeout as this call is sent on it ("Server disconnected without sending a response").
            with httpx.Client(base_url=served.url, timeout=60) as fresh:
                answer = fresh.post(f"/tools/{self.peer.key}_{tool}/call", json=arguments)
            return answer.json(), quiet

    def source(self, log: Path | None = None, proxy: CountingProxy | None = None) -> str:
        """Its ``sources:`` entry: an HTTP one through ``proxy`` (default its own), a stdio one counted to ``log``
        (default ``counter_log``)."""
        if self.proxy is not None:
            target = f"url: '{(proxy or self.proxy).url()}'"
        else:
            command, *args = self.wrapped(log or self.counter_log)
            target = f"command: {json.dumps(command)}, args: {json.dumps(args)}, env: {json.dumps(self.env)}"
        # connect_timeout_s: some twenty upstreams start at once on a shared CI machine.
        return f"  - id: {self.peer.key}\n    prefix: {self.peer.key}_\n    mcp: {{{target}, connect_timeout_s: 60}}\n"

    def parameters(self) -> str | StdioServerParameters:
        if self.peer.http:
            return f"http://127.0.0.1:{self.port}/mcp"
        # Behind the counter too (its own log), for the upstream's stderr to go to a file rather than the test's.
        command, *args = self.wrapped(self.log.with_suffix(".direct"))
        return StdioServerParameters(command=command, args=args, env=self.env or None)

    async def ask_directly(self) -> None:
        """List and call it with the official client, straight (no proxy, no counter): what the gateway must
        match."""
        # Declaring what the gateway's pooled session declares (it relays elicitation and sampling): some servers
        # list tools by the client's capabilities (server-everything's trigger-elicitation-request, …).
        async with Client(self.parameters(), read_timeout_seconds=60, elicitation_callback=_never_asked,
                          sampling_callback=_never_asked) as client:
            tools = {tool.name: listed(tool) for tool in (await client.list_tools()).tools}
            answers = [dumped(await client.call_tool(tool, arguments)) for tool, arguments in self.calls]
            self.direct = Direct(client.protocol_version, tools, answers)


@dataclass
class Federation:
    upstreams: dict[str, Running]
    served: RunningServer

    @property
    def url(self) -> str:
        return self.served.url

    def restart_all(self, directory: Path) -> dict[str, dict[str, Any] | str]:
        """Every upstream restarted and called (``Running.restarted``), side by side: the answers, or what went
        wrong."""
        def restart(running: Running) -> dict[str, Any] | str:
            try:
                return running.restarted(directory / running.peer.key)
            except Exception as error:  # noqa: BLE001 — that upstream's restart test fails saying so
                return repr(error)

        with ThreadPoolExecutor(len(self.upstreams) or 1) as pool:
            answers = pool.map(restart, self.upstreams.values())
            return dict(zip(self.upstreams, answers, strict=True))


def start(directory: Path, wanted: list[Peer], stack: ExitStack) -> Federation:
    """Start ``wanted`` side by side, ask each directly, then serve a gateway declaring them all."""
    values = prepare(directory)
    upstreams = {peer.key: Running(peer, {**values, "port": str(free_port())}, directory / f"{peer.key}.log")
                 for peer in wanted}
    http = [upstream for upstream in upstreams.values() if upstream.peer.http]
    for upstream in http:
        stack.callback(upstream.stop)
        upstream.spawn()
    for upstream in http:
        upstream.wait_listening()
        upstream.proxy = CountingProxy(upstream.port)
        stack.callback(upstream.proxy.close)

    async def ask(upstream: Running) -> None:
        try:
            await upstream.ask_directly()
        except Exception as error:  # noqa: BLE001 — that upstream's tests fail saying so; the others go on
            upstream.problems.append(f"asked directly: {error!r}")

    async def ask_all() -> None:
        async with anyio.create_task_group() as asking:
            for upstream in upstreams.values():
                asking.start_soon(ask, upstream)

    anyio.run(ask_all)
    definitions = directory / "defs"
    definitions.mkdir()
    for key, upstream in upstreams.items():
        # A file each, as an admin would keep them: a problem of one is reported at its own file.
        (definitions / f"{key}.yaml").write_text("sources:\n" + upstream.source())
    served = stack.enter_context(running(definitions))
    return Federation(upstreams, served)


def rows() -> list[dict] | None:
    """The table's rows, when every check of every upstream ran in this session (else None)."""
    if any(len(OUTCOMES.get(peer.key, {})) < len(CHECKS) or peer.key not in REVISIONS for peer in PEERS):
        return None
    return [{"name": peer.name, "version": peer.version, "transport": peer.transport,
             "revision": REVISIONS[peer.key], "checks": OUTCOMES[peer.key], "reasons": peer.expected_failures}
            for peer in PEERS]


async def _never_asked(context: Any, params: Any) -> Any:
    """A capability declared for the listing to match the gateway's; the calls made never ask."""
    raise AssertionError(f"the upstream asked the direct client: {params}")
