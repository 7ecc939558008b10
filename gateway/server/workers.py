"""``serve --workers N``: N worker processes answering on one port, each a replica in cluster mode.

One Python process serves on one core (the GIL); a machine with more cores runs more processes. The supervisor
(this module, in the process the operator started) binds the listening socket once and hands it to N children,
each a whole ``serve`` (its own catalog, reloads, registry record), which accept from that one queue: the kernel
gives each connection to whichever worker accepts first, so a busy worker takes fewer, and a worker that dies
loses only the connections it had accepted — nothing waiting in the queue (separate ``SO_REUSEPORT`` sockets
would reset the ones queued on the dead worker's socket).

What a worker holds for later requests — 2025-11-25 sessions, rate-limit counters, approvals, sign-ins, held
answers — must be where every worker finds it: cluster mode (``cluster.redis_url``) is required for N > 1, as for
replicas behind a load balancer (docs/cluster.md); without it a session opened on one worker would be unknown to
the next, and each limit would be N limits.

The supervisor restarts a worker that exits: at once when it had run ``STEADY_S`` after being ready, else after a
pause growing from 1 s to 30 s while it keeps ending soon after its start; a worker that fails before *any* worker
was ready (invalid definitions, a bad settings file) ends the supervisor with its exit code, as ``serve`` would.
SIGTERM or SIGINT stops every worker gracefully (SIGTERM, then SIGKILL after the grace period) and ends it; SIGHUP
is passed to every worker (each rebuilds its catalog); a supervisor that dies however it dies takes its workers
with it (Linux's parent-death signal).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..runtime.cluster import WORKER_ENV as WORKER

log = logging.getLogger("gateway.workers")

LISTEN_FD = "TOOL_GATEWAY_LISTEN_FD"  # the inherited listening socket's descriptor: this process is a worker
READY_FD = "TOOL_GATEWAY_READY_FD"  # a pipe's write end: one byte once the worker's catalog is built
SUPERVISOR = "TOOL_GATEWAY_SUPERVISOR_PID"  # a worker ends when this process does (``worker_socket``)
PR_SET_PDEATHSIG = 1
FIRST_PAUSE_S, MAX_PAUSE_S = 1.0, 30.0
STEADY_S = 10.0  # a worker that ran this long had started well: if it ends, it is started again at once
POLL_S = 0.2
BACKLOG = 2048  # uvicorn's default for a socket it binds itself


class NeedsSharedState(Exception):
    pass


class CannotListen(Exception):
    pass


def check(count: int, settings: Any) -> None:
    """``NeedsSharedState`` when ``count`` workers cannot share what a caller's later requests need."""
    if count > 1 and not settings.cluster.get("redis_url"):
        raise NeedsSharedState(
            f"--workers {count} needs cluster mode: each worker is a replica, and without shared state a 2025-11-25 "
            "session opened on one worker is unknown to the others, and every rate limit, approval and sign-in is "
            "kept per worker. Set cluster.redis_url in the settings (see docs/cluster.md), or serve one worker")


def worker_socket() -> socket.socket | None:
    """The listening socket the supervisor handed this process (None: not a worker). A worker is told SIGTERM
    when its supervisor dies, however it dies (a SIGKILL runs no handler): workers left behind would hold the port
    and serve without anyone to restart them."""
    fd = os.environ.pop(LISTEN_FD, None)  # not handed on to what this process may start
    if not fd:
        return None
    import ctypes  # here: only a worker pays for it at start-up

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the worker outlives a killed supervisor
        log.debug("no parent-death signal here")
    if str(os.getppid()) != os.environ.get(SUPERVISOR):  # it died before the signal was asked for
        raise SystemExit("the supervisor of this worker has exited")
    return socket.socket(fileno=int(fd))


def worker_label() -> str | None:
    return os.environ.get(WORKER)


def tell_ready() -> None:
    """Tell the supervisor this worker built its catalog (nothing when not a worker)."""
    fd = os.environ.pop(READY_FD, None)
    if fd:
        with os.fdopen(int(fd), "wb") as pipe:
            pipe.write(b"1")


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes] | None = None
    ready_pipe: int | None = None  # read end, until the worker says it is ready
    ready: bool = False
    started: float = 0.0
    pause_s: float = 0.0  # before the next start, grown while it keeps ending soon after its start
    restart_at: float = 0.0


class Supervisor:
    def __init__(self, count: int, host: str, port: int, argv: list[str], grace_s: float):
        """``argv``: the command line each worker runs (``serve ... --workers N``); ``grace_s``: what a worker's
        requests in flight get to finish once it is told to stop."""
        self.count, self.argv, self.grace_s = count, argv, grace_s
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self.listener = socket.create_server((host, port), family=family, backlog=BACKLOG)
        except OSError as exc:
            raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        if port == 0:  # the port the system chose: each worker says it, and builds {{ gateway.base_url }} from it
            self.argv = [*argv, "--port", str(self.listener.getsockname()[1])]
        log.info("%d workers on http://%s:%d", count, host, self.listener.getsockname()[1])
        self.listener.set_inheritable(True)
        self.workers = [_Worker(index) for index in range(count)]
        self.stopping = False
        self.any_ready = False

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._stop)
        signal.signal(signal.SIGHUP, self._reload)  # each worker rebuilds its catalog on SIGHUP, as `serve` does
        try:
            for worker in self.workers:
                self._start(worker)
            while not self.stopping:
                failed = self._watch()
                if failed is not None:
                    return failed
            return 0
        finally:
            self._stop_all()
            self.listener.close()

    def _start(self, worker: _Worker) -> None:
        read_end, write_end = os.pipe()
        env = {**os.environ, LISTEN_FD: str(self.listener.fileno()), READY_FD: str(write_end),
               WORKER: f"{worker.index}/{self.count}", SUPERVISOR: str(os.getpid())}
        # -P: the package installed, never a `gateway/` that happens to be in the working directory.
        worker.process = subprocess.Popen([sys.executable, "-P", "-m", "gateway", *self.argv], env=env,
                                          pass_fds=(self.listener.fileno(), write_end))
        os.close(write_end)
        worker.ready_pipe, worker.ready, worker.started = read_end, False, time.monotonic()
        log.info("worker %d started (pid %d)", worker.index, worker.process.pid)

    def _watch(self) -> int | None:
        """One look at the workers: note the ready, restart the dead; an exit code when the supervisor must end."""
        pipes = [w.ready_pipe for w in self.workers if w.ready_pipe is not None]
        if pipes:
            readable, _, _ = select.select(pipes, [], [], POLL_S)
        else:
            readable = []
            time.sleep(POLL_S)
        for worker in self.workers:
            if worker.ready_pipe is not None and worker.ready_pipe in readable:
                worker.ready = bool(os.read(worker.ready_pipe, 1))  # b"": it closed the pipe without saying so
                self.any_ready = self.any_ready or worker.ready
                self._close_pipe(worker)
            if self.stopping:
                return None
            if worker.process is None:
                if time.monotonic() >= worker.restart_at:
                    self._start(worker)
                continue
            code = worker.process.poll()
            if code is None:
                continue
            self._close_pipe(worker)
            if not worker.ready and not self.any_ready:
                log.error("worker %d exited with %d before any worker was ready: stopping", worker.index, code)
                return code or 1
            # A worker that ran a while is started again at once; one that keeps ending soon after its start (before
            # it was ready, or just after) waits longer each time, so that a crash at start-up never spins.
            ran_s = time.monotonic() - worker.started
            worker.pause_s = 0.0 if worker.ready and ran_s >= STEADY_S else min(
                max(worker.pause_s * 2, FIRST_PAUSE_S), MAX_PAUSE_S)
            log.warning("worker %d (pid %d) exited with %d after %.1f s; starting another%s", worker.index,
                        worker.process.pid, code, ran_s,
                        f" in {worker.pause_s:g} s" if worker.pause_s else "")
            worker.process, worker.restart_at = None, time.monotonic() + worker.pause_s
        return None

    def _close_pipe(self, worker: _Worker) -> None:
        if worker.ready_pipe is not None:
            os.close(worker.ready_pipe)
            worker.ready_pipe = None

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _reload(self, signum: int, frame: Any) -> None:
        for worker in self.workers:
            if worker.process is not None and worker.process.poll() is None:
                worker.process.send_signal(signal.SIGHUP)

    def _stop_all(self) -> None:
        running = [w.process for w in self.workers if w.process is not None and w.process.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + self.grace_s + 5
        for process in running:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for worker in self.workers:
            self._close_pipe(worker)
