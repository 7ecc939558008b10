"""Offer rules (a tool's ``offer:``) as RE2 patterns, matched in time linear in the message.

Under Python's ``re`` an admin's ``when_message_matches: '(a+)+$'`` backtracked: each character of a chat
message doubled the time, and 24 of them froze the server for 1.4 s (F11). RE2 (``google-re2``) never
backtracks, so what it cannot match that way has no syntax there: backreferences, lookarounds, atomic groups,
possessive quantifiers, conditionals. Such a pattern is a load problem saying so (``pattern_problem``).

Linear is not yet cheap: a search costs about (message length) x (active states of the pattern), and a pattern
such as ``(a|b).{240}z`` keeps hundreds of states alive. So two bounds make the cost of one rule a constant:
a pattern's compiled program may hold ``MAX_PROGRAM_SIZE`` instructions (refused at load beyond that; the
rules people write hold 10 to 100, ``\\pL`` alone 1,200), and a rule sees the first ``MAX_MATCHED_CHARS``
characters of the message. RE2 syntax differs from Python's in one more way worth knowing: ``\\w``, ``\\d``,
``\\s`` and ``\\b`` are ASCII; ``\\pL`` and ``\\pN`` are letters and digits of every script.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import re2

MAX_MATCHED_CHARS = 20_000  # of the latest user message, from its start
MAX_PROGRAM_SIZE = 2_000  # RE2 instructions of one when_message_matches pattern
LINEAR = ("offer rules cannot have: they are matched in linear time, in RE2 syntax, which has no backreferences, "
          "lookarounds, atomic groups, possessive quantifiers or conditionals")
# What RE2 names in its error (the operand after the colon), and what that construct is called here.
_UNSUPPORTED = (
    (("\\1", "\\2", "\\3", "\\4", "\\5", "\\6", "\\7", "\\8", "\\9", "\\g", "(?P"), "a backreference"),
    (("(?=", "(?!", "(?<=", "(?<!"), "a lookaround"),
    (("(?>",), "an atomic group"),
    (("(?(",), "a conditional"),
)
_POSSESSIVE = ("++", "*+", "?+", "}+")


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern to stderr; the problem says it instead
    options.never_capture = True  # a rule only asks whether the message matches: no groups to track
    return options


_OPTIONS = _options()


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ``ValueError`` saying what to change when it cannot be used as a rule."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise ValueError(_explain(exc)) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(f"regular expression too large: it compiles to {compiled.programsize} RE2 instructions, "
                         f"more than the {MAX_PROGRAM_SIZE} an offer rule may hold (a large counted repetition "
                         "such as '.{500}' costs instructions for every repeat)")
    return compiled


def rule_patterns(rule: Mapping[str, Any]) -> tuple[Any, ...]:
    """The patterns of an offer rule, either of which may hold. ``when_message_matches`` was checked at load."""
    patterns = []
    if rule.get("when_message_matches"):
        patterns.append(compile_pattern(rule["when_message_matches"]))
    words: Sequence[str] = rule.get("when_message_mentions") or ()
    if words:
        # A word counts where a word starts: at the start of the message or after a character that is not a
        # letter, digit or '_' of any script (Python's \W; RE2's \W is ASCII, and RE2 has no lookbehind).
        # Built here from literal words, it is not bound by MAX_PROGRAM_SIZE: its states are the words' letters.
        alternatives = "|".join(re2.escape(word) for word in words)
        patterns.append(re2.compile(f"(?i)(?:^|[^\\pL\\pN_])(?:{alternatives})", _OPTIONS))
    return tuple(patterns)


def rule_holds(patterns: Sequence[Any], message: str) -> bool:
    """Whether any pattern is found in the first ``MAX_MATCHED_CHARS`` characters of ``message``."""
    text = message[:MAX_MATCHED_CHARS]
    return any(pattern.search(text) is not None for pattern in patterns)


def _explain(exc: re2.error) -> str:
    reason = exc.args[0].decode("utf-8", "replace") if isinstance(exc.args[0], bytes) else str(exc.args[0])
    operand = reason.rpartition(": ")[2]
    for starts, construct in _UNSUPPORTED:
        if operand.startswith(starts):
            shown = "(?P=name)" if operand == "(?P" else operand  # RE2 names only the start of the group
            return f"regular expression uses {construct} ('{shown}'), which {LINEAR}"
    if reason.startswith("bad repetition operator") and operand.endswith(_POSSESSIVE):
        return f"regular expression uses a possessive quantifier ('{operand}'), which {LINEAR}"
    if operand == "\\Z":
        return "invalid regular expression: RE2 writes the end of the text '\\z', not '\\Z'"
    return f"invalid regular expression: {reason} (offer rules use RE2 syntax)"
