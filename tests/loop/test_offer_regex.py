"""Offer rules are admin regexes matched in linear time (RE2): a catastrophic pattern cannot freeze the server, and
what RE2 cannot match in linear time (backreferences, lookarounds) is a load problem at file:line:col."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_llm import Reply
from support import catalog_for

from gateway.definitions.offer_rules import MAX_MATCHED_CHARS, MAX_PROGRAM_SIZE
from gateway.errors import DefinitionsInvalid
from gateway.loop import offer
from gateway.loop.handoff import Handoffs
from gateway.loop.offer import offered_for

TOOL = '''
tools:
  - id: {id}
    name: A tool with an offer rule
    user_description: Offered by a rule.
    ai_description: Offered when the latest user message fits its rule.
    binding: {{python: "offer_tools:noop"}}
    offer: {rule}
    toolsets: [offer]
'''
CATASTROPHIC = "{when_message_matches: '(a+)+$'}"


def write_definitions(root: Path, *tools: tuple[str, str]) -> Path:
    """A definitions directory holding one file with the tools given as (id, offer rule in YAML flow style)."""
    root.mkdir(exist_ok=True)
    (root / "python").mkdir(exist_ok=True)
    (root / "python" / "offer_tools.py").write_text("def noop() -> str:\n    return 'ok'\n")
    text = "tools:\n" + "".join(TOOL.format(id=tool_id, rule=rule).split("tools:\n", 1)[1] for tool_id, rule in tools)
    (root / "offers.yaml").write_text(text)
    return root


def problems_for(tmp_path: Path, rule: str) -> list:
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(write_definitions(tmp_path / "defs", ("ruled", rule)))
    return list(caught.value.problems)


def test_a_catastrophic_pattern_matches_a_long_message_correctly(tmp_path):
    """`(a+)+$` (exponential in Python's re) is searched in 10,000-character messages and answers right: a match
    for all a's, none when a '!' ends the run."""
    tool = catalog_for(write_definitions(tmp_path / "defs", ("ruled", CATASTROPHIC))).tools["ruled"]
    assert offered_for(tool, "a" * 10_000) is True
    assert offered_for(tool, "a" * 10_000 + "!") is False
    assert offered_for(tool, "b" * 10_000) is False


def test_the_chat_endpoint_answers_a_message_made_to_backtrack(tmp_path, endpoint, llm):
    """Through /v1/chat/completions, a 10,000-character message aimed at `(a+)+$` gets its answer, and the tool is
    offered exactly when the pattern matches."""
    ep = endpoint(write_definitions(tmp_path / "defs", ("ruled", CATASTROPHIC)))
    llm.answer(Reply(content="no"), Reply(content="yes"))
    for text in ("a" * 9_999 + "!", "a" * 10_000):
        response = ep.post({"messages": [{"role": "user", "content": text}], "gateway": {"toolsets": ["offer"]}})
        assert response.status_code == 200
    offered = [[tool["function"]["name"] for tool in sent.body.get("tools", [])] for sent in llm.requests]
    assert offered == [[], ["ruled"]]


@pytest.mark.parametrize(("pattern", "why"), [
    (r"(a)\\1", "backreference"),
    (r"(?P<w>a)(?P=w)", "backreference"),
    (r"(?<!x)booking", "lookaround"),
    (r"(?=book)", "lookaround"),
    (r"(?!book)x", "lookaround"),
    (r"(?>a+)", "atomic group"),
    (r"a++", "possessive"),
])
def test_what_re2_cannot_match_in_linear_time_is_a_load_problem(tmp_path, pattern, why):
    """A backreference, a lookaround, an atomic group or a possessive quantifier is refused at load, at the
    pattern's file:line:col, with a message saying why offer rules cannot have it."""
    problems = problems_for(tmp_path, f'{{when_message_matches: "{pattern}"}}')
    assert len(problems) == 1, problems
    problem = problems[0]
    assert (Path(problem.file).name, problem.line) == ("offers.yaml", 7)
    assert problem.column > 1
    assert why in problem.message and "linear time" in problem.message, problem.message


def test_an_invalid_pattern_is_still_reported_as_such(tmp_path):
    """A pattern that is not a regular expression at all is reported as invalid, naming RE2's reason."""
    [problem] = problems_for(tmp_path, '{when_message_matches: "book(ing"}')
    assert "invalid regular expression" in problem.message and "missing )" in problem.message


@pytest.mark.parametrize(("message", "offered"), [
    ("Show my Booking 7 please", True),
    ("(booking) 7", True),
    ("bookings for May", True),  # the start of a word
    ("rebooking", False),  # not the start of a word
    ("Une ÉCOLE à Zürich", True),  # "école", ignoring case beyond ASCII
    ("Zürich", False),  # "rich" inside a word with a non-ASCII letter before it
    ("a reservation", True),
    ("nothing here", False),
])
def test_mentions_match_the_start_of_a_word_ignoring_case(tmp_path, message, offered):
    """`when_message_mentions` matches any word where a word starts (Unicode letters and digits count as word
    characters), ignoring case, as before it was matched by RE2."""
    rule = "{when_message_mentions: [booking, reservation, école, rich]}"
    tool = catalog_for(write_definitions(tmp_path / "defs", ("ruled", rule))).tools["ruled"]
    assert offered_for(tool, message) is offered


def test_a_pattern_too_large_to_match_quickly_is_a_load_problem(tmp_path):
    """A pattern whose RE2 program passes MAX_PROGRAM_SIZE (a long counted repetition of any character, which
    keeps that many states alive on every character) is refused at load, naming its size and the limit."""
    [problem] = problems_for(tmp_path, '{when_message_matches: "(a|b).{900}z"}')
    assert "too large" in problem.message and str(MAX_PROGRAM_SIZE) in problem.message


def test_rules_see_the_first_characters_of_the_message_only(tmp_path):
    """A rule looks at the first MAX_MATCHED_CHARS characters of the message: a mention past them does not count,
    which keeps the cost of a rule bounded whatever the message's length."""
    defs = write_definitions(tmp_path / "defs", ("ruled", "{when_message_mentions: [booking]}"))
    tool = catalog_for(defs).tools["ruled"]
    assert offered_for(tool, "x" * (MAX_MATCHED_CHARS - 8) + " booking") is True
    assert offered_for(tool, "x" * MAX_MATCHED_CHARS + " booking") is False


def _on_an_event_loop() -> bool:
    """Whether the calling thread is running an event loop (asyncio's or uvloop's, whatever its threads' names)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def matching_threads(monkeypatch) -> list[bool]:
    """Per rule checked for the test's requests, whether it was matched on an event loop's thread."""
    threads: list[bool] = []
    original = offer.offered_for

    def recording(tool, message):
        threads.append(_on_an_event_loop())
        return original(tool, message)

    monkeypatch.setattr(offer, "offered_for", recording)
    return threads


@pytest.mark.parametrize(("length", "off_the_loop"), [(100, False), (10_000, True)])
def test_offer_rules_of_a_long_message_are_matched_off_the_event_loop(tmp_path, endpoint, llm, matching_threads,
                                                                      length, off_the_loop):
    """A short message has its offer rules matched inline; a long one in a worker thread, so many rules over a
    long message never hold the event loop (whose thread is the one answering the request)."""
    threads = matching_threads
    ep = endpoint(write_definitions(tmp_path / "defs", ("ruled", CATASTROPHIC)))
    llm.answer(Reply(content="done"))
    response = ep.post({"messages": [{"role": "user", "content": "a" * length}], "gateway": {"toolsets": ["offer"]}})

    assert response.status_code == 200
    assert threads and all(on_loop != off_the_loop for on_loop in threads), threads


def test_a_long_message_reads_the_remembered_handoffs_on_the_event_loop(tmp_path, endpoint, llm, monkeypatch):
    """Only offer matching leaves the event loop: the handoffs, which the loop's thread changes, are read there."""
    threads: list[bool] = []
    original = Handoffs.expand

    def recording(self, principal, messages):
        threads.append(_on_an_event_loop())
        return original(self, principal, messages)

    monkeypatch.setattr(Handoffs, "expand", recording)
    ep = endpoint(write_definitions(tmp_path / "defs", ("ruled", CATASTROPHIC)))
    llm.answer(Reply(content="done"))
    response = ep.post({"messages": [{"role": "user", "content": "a" * 10_000}], "gateway": {"toolsets": ["offer"]}})

    assert response.status_code == 200
    assert threads and all(threads), threads


def test_many_rules_over_a_shorter_message_are_matched_off_the_event_loop(tmp_path, endpoint, llm, matching_threads):
    """What leaves the event loop is the characters times the rules: 1,000 characters under 3 rules do too."""
    threads = matching_threads
    rules = [(f"ruled_{n}", CATASTROPHIC) for n in range(3)]
    ep = endpoint(write_definitions(tmp_path / "defs", *rules))
    llm.answer(Reply(content="done"))
    response = ep.post({"messages": [{"role": "user", "content": "a" * 1_000}], "gateway": {"toolsets": ["offer"]}})

    assert response.status_code == 200
    assert threads and not any(threads), threads
