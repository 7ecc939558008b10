"""How much a search returns (``k``), and up to how many tools it runs on the event loop."""

DEFAULT_K = 8
MAX_K = 50
# Up to this many tools a search runs on the event loop (a fraction of a millisecond); past it, in a worker thread.
INLINE_TOOLS = 5_000
