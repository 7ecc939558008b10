"""The Python MCP frameworks of the federation matrix that cannot share the test environment: FastMCP 2 and 3 pin an
``mcp`` 1.x that the gateway's ``mcp`` 2.3 excludes. Each is installed into a directory of its own and its upstream
runs with that directory on PYTHONPATH (FastMCP 4 comes with the test extra). The versions are pinned here, once:

    python tests/federation/peers.py            # install the missing ones (pip, from PyPI), then list them
    python tests/federation/peers.py --check    # exit 1 naming the missing ones

``TOOL_GATEWAY_PEERS`` moves the directory (default ``tests/federation/.peers``, ignored by git).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PEERS = {"fastmcp-2": "fastmcp==2.14.7", "fastmcp-3": "fastmcp==3.4.11"}
DIRECTORY = Path(os.environ.get("TOOL_GATEWAY_PEERS") or Path(__file__).resolve().parent / ".peers")


def version(peer: str) -> str:
    return PEERS[peer].split("==")[1]


def location(peer: str) -> Path:
    """Where ``peer`` is installed: a directory for PYTHONPATH."""
    return DIRECTORY / PEERS[peer].replace("==", "-")


def installed(peer: str) -> bool:
    """Whether ``peer`` is installed at its pinned version (pip's record of it, written last, says so)."""
    name, pinned = PEERS[peer].split("==")
    return (location(peer) / f"{name}-{pinned}.dist-info" / "RECORD").is_file()


def missing() -> list[str]:
    return [peer for peer in PEERS if not installed(peer)]


def install(peer: str) -> None:
    # --target keeps its dependencies (mcp 1.x, pydantic…) beside it; --upgrade lets a half-finished try be redone.
    # pip's output is shown only when it fails: it compares the target with this environment and calls mcp 1.x
    # there a conflict, which for a directory of its own it is not.
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--upgrade", "--target", str(location(peer)), PEERS[peer]],
                          check=False, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"pip could not install {PEERS[peer]}:\n{done.stdout}{done.stderr}")


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        for peer in missing():
            print(f"installing {PEERS[peer]} into {location(peer)}", flush=True)
            install(peer)
    for peer, requirement in PEERS.items():
        print(f"{requirement}: {'installed' if installed(peer) else 'MISSING'} ({location(peer)})")
    return 1 if missing() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
