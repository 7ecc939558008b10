"""Values in the shared state that the gateway did not write in that shape — another writer's, or corrupt. Each
reader treats one as missing (never a 500) and says so once per key: a client retrying, or ``/status`` polled,
must not grow the log with every request. The keys already told are remembered, within a bound."""

from __future__ import annotations

import logging

REMEMBERED = 1024  # keys told; beyond, the memory starts again (a key may then be told once more)


class Misshapen:
    def __init__(self, log: logging.Logger):
        self.log = log
        self.told: set[str] = set()

    def tell(self, key: str, message: str) -> None:
        """Log ``message`` (a warning) unless ``key`` was told already."""
        if key in self.told:
            return
        if len(self.told) >= REMEMBERED:
            self.told.clear()
        self.told.add(key)
        self.log.warning("%s", message)
