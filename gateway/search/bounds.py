"""How much a search returns (``k``), and which searches run on the event loop."""

DEFAULT_K = 8
MAX_K = 50
# A search of up to this many tools, for a request of up to this many characters, runs on the event loop (a fraction
# of a millisecond); any other in a worker thread. A long request is many terms and parts, each a BM25 pass: 4 KB of
# common words in many sentences took 8.5 ms over 5,000 tools, against 0.36 ms for a question.
INLINE_TOOLS = 5_000
INLINE_QUERY_CHARS = 512


def inline(tools: int, query: str) -> bool:
    """Whether a search of ``tools`` tools for ``query`` is cheap enough for the event loop."""
    return tools <= INLINE_TOOLS and len(query) <= INLINE_QUERY_CHARS
