"""Between the gateway and a stdio upstream: runs the upstream, relays both directions byte for byte, and writes
down each JSON-RPC message the gateway sends it (its method, or ``(answer)``), one a line, to LOG; the upstream's
pid is added to LOG.pids (a test kills it there to restart it), what it writes on stderr to LOG.stderr:

    python stdio_counter.py LOG -- COMMAND [ARG...]

It ends with the upstream: when the upstream exits (the gateway then sees its stdio close, as from a crash), and
when the gateway closes stdin or stops this process (the upstream is stopped with it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path


def method(line: bytes) -> str:
    try:
        message = json.loads(line)
    except ValueError:
        return "(not json)"
    return message.get("method", "(answer)") if isinstance(message, dict) else "(batch)"


def relay_requests(upstream: subprocess.Popen[bytes], log: Path) -> None:
    assert upstream.stdin is not None
    with log.open("a") as seen:
        for line in sys.stdin.buffer:  # the stdio transport: one JSON-RPC message a line
            seen.write(method(line) + "\n")
            seen.flush()
            try:
                upstream.stdin.write(line)
                upstream.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
    upstream.stdin.close()


def main(log: Path, command: list[str]) -> int:
    with Path(f"{log}.stderr").open("ab") as errors:
        upstream = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
    with Path(f"{log}.pids").open("a") as pids:  # one a spawn: the gateway spawns one to list, one to hold
        pids.write(f"{upstream.pid}\n")
    signal.signal(signal.SIGTERM, lambda *_: upstream.terminate())
    threading.Thread(target=relay_requests, args=(upstream, log), daemon=True).start()
    assert upstream.stdout is not None
    while chunk := upstream.stdout.read1(65536):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    return upstream.wait()


if __name__ == "__main__":
    separator = sys.argv.index("--")
    sys.exit(main(Path(sys.argv[1]), sys.argv[separator + 1:]))
