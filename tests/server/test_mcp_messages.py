"""The MCP fast path's reading of ``tools/call`` params against the SDK's own validators."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.server.mcp.messages import PlainCall, import_types, validated

TYPES = import_types()
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=8)
META = st.fixed_dictionaries({}, optional={
    "io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28", "2025-11-25"]) | JSON,
    "io.modelcontextprotocol/clientCapabilities": st.just({}) | st.just({"roots": {"listChanged": True}}) | JSON,
    "progressToken": st.integers() | st.text(max_size=4) | JSON,
    "gateway/session": st.text(max_size=4) | JSON, "traceparent": JSON, "other": JSON})
PARAMS = st.fixed_dictionaries({}, optional={
    "name": st.text(max_size=8) | JSON,
    "arguments": st.none() | st.dictionaries(st.text(max_size=4), JSON, max_size=3) | JSON,
    "_meta": META | JSON, "task": JSON, "extra": JSON})


def _sdk(version: str, params: dict) -> object | None:
    try:
        TYPES.validate("tools/call", version, params)
        return TYPES.params["tools/call"].model_validate(params, by_name=False)
    except (KeyError, ValueError):
        return None


@settings(max_examples=400, deadline=None)
@given(params=PARAMS, version=st.sampled_from(sorted(TYPES.handshake | TYPES.modern)))
@example(params={"name": "sum", "task": 5}, version="2025-11-25")
@example(params={"name": "sum", "arguments": [1]}, version="2025-11-25")
@example(params={"name": 5, "arguments": {}}, version="2025-11-25")
@example(params={"name": "sum", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                          "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": 7}},
         version="2026-07-28")
@example(params={"name": "sum", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                          "io.modelcontextprotocol/clientCapabilities": 5}}, version="2026-07-28")
def test_a_plain_call_is_read_as_the_sdk_reads_it(params, version):
    """Where the fast reading (``PlainCall``) takes a call's params, the SDK's validators accept them and its
    model holds the same name, arguments and ``_meta`` (read again from what was kept of an earlier call's);
    where the SDK refuses params, so does ``validated``."""
    got = validated(TYPES, "tools/call", version, params)
    again = validated(TYPES, "tools/call", version, params)
    model = _sdk(version, params)
    if model is None:
        assert got is None and again is None
    if isinstance(got, PlainCall):
        assert model is not None
        assert (got.name, got.arguments, got.meta) == (model.name, model.arguments, model.meta)
        assert again == got


def test_the_plain_reading_is_taken_only_on_the_handshake_revisions():
    """A 2026-07-28 call without ``_meta`` is refused (its envelope is required), never read plainly."""
    params = {"name": "sum", "arguments": {"a": 1}}
    assert isinstance(validated(TYPES, "tools/call", "2025-11-25", params), PlainCall)
    assert validated(TYPES, "tools/call", "2026-07-28", params) is None


def test_judged_metas_are_bounded():
    """Every call naming a new progress token leaves at most ``METAS_KEPT`` judged ``_meta`` values behind."""
    from gateway.server.mcp.messages import METAS_KEPT

    for token in range(METAS_KEPT * 3):
        params = {"name": "sum", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                           "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": token}}
        assert validated(TYPES, "tools/call", "2026-07-28", params).meta["progress_token"] == token
        assert len(TYPES.metas) <= METAS_KEPT


def test_an_infinite_number_is_not_read_as_a_kept_null():
    """A ``_meta`` holding 1e400 (read as infinity) after one holding null is judged by the SDK, not taken for it."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    for value in (None, float("inf")):
        params = {"name": "sum", "_meta": {**meta, "gateway/session": value}}
        got, model = validated(TYPES, "tools/call", "2025-11-25", params), _sdk("2025-11-25", params)
        assert (got is None) == (model is None) and (got is None or got.meta == model.meta)


def test_a_meta_holding_null_is_judged_on_the_fast_path_and_never_kept():
    """A ``_meta`` whose JSON holds null (a null value, or a token spelled with it) is read on the fast path, as
    the SDK reads it, and judged afresh on each call rather than kept (its key could also name 1e400)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    for extra in ({"progressToken": "null-1"}, {"gateway/session": None}):
        params = {"name": "sum", "_meta": {**meta, **extra}}
        got, model = validated(TYPES, "tools/call", "2026-07-28", params), _sdk("2026-07-28", params)
        assert isinstance(got, PlainCall) and got.meta == model.meta
    assert not any(b"null" in key for _, key in TYPES.metas)
