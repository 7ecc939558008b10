"""What a tool says about itself, as the terms search ranks it by, and a request's text as the terms it asks for.

Text is split where people and programs join words — case changes (``getWeather``), digits, underscores, dots,
hyphens — lowercased, common English words dropped, and each word reduced to its stem (Snowball, through
PyStemmer), so "forecasts", "forecasting" and ``weather_forecast`` meet. A tool's fields weigh by repetition:
what a tool takes (its parameters' names) counts most: the words of a request name the things it is about, and
those are what a tool's parameters are named for. The values a parameter's schema names (``enum``, ``const``,
``default``, ``examples``) are read too: "in Celsius", "an IMAX film", "a drama" are words of a request that only a
tool's accepted values share.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from itertools import islice
from typing import Any

import Stemmer

# Field weights (how often a field's terms are repeated in the tool's document), tuned on the tune split of
# bench/bench_tool_search.py (BFCL simple_python, multiple, live_simple) only.
WEIGHTS = {"id": 1, "name": 1, "description": 1, "user_description": 1, "parameter": 3, "parameter_description": 1,
           "value": 1, "label": 1}
VALUES = ("enum", "const", "default", "examples")  # where a parameter's schema names the values it takes
MAX_QUERY_CHARS = 4_096  # a conversation is searched by its last words: what is asked now
MAX_DEPTH = 4  # nested parameter objects read this deep: deeper names rarely say what a tool is for
MAX_FIELD_CHARS = 8_192  # of one description: an essay pasted as a description is not read whole
MAX_PARTS = 8  # of a request that asks for several things, its last parts are searched apart (what is asked now)
ALIKE_TERMS = 64  # a description's first distinct terms: what two tools' descriptions are compared by

# One pass: an acronym before a capitalised word (HTTPServer: HTTP, Server), a capitalised or lowercase word (any
# script's letters), an acronym, digits, and what is left of letters (ÉCOLE).
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W\d_A-Z]+|[A-Z]+|[0-9]+|[^\W\d_]+")
SHORT = 64  # texts this short (ids, names, parameter names) repeat across tools: their terms are remembered
STOPWORDS = frozenset({"a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have",
    "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off",
    "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "please", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were",
    "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "yourselves"})


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def words(text: str) -> list[str]:
    """The words of ``text``, lowercased, split where case, digits or punctuation join them."""
    return [word.lower() for word in _WORD.findall(text[:MAX_FIELD_CHARS])]


def terms(text: str) -> list[str]:
    """``text``'s words as search terms: no common words, each stemmed."""
    return list(_short_terms(text)) if len(text) <= SHORT else _terms(text)


@lru_cache(maxsize=65_536)
def _short_terms(text: str) -> tuple[str, ...]:
    return tuple(_terms(text))


def _terms(text: str) -> list[str]:
    return _stemmer().stemWords([word for word in words(text) if word not in STOPWORDS])


# Where a request goes on to ask for something else: a sentence's end, a line's, and the words that begin a next
# request. Each run of spaces is taken once, from its start (no pattern here backtracks over one).
_SENTENCE_END = re.compile(r"(?<=[.?!;])\s+|\n+")
_NEXT_ASK = re.compile(r"\b(?:then|also|additionally|secondly|thirdly|lastly|finally|after that|next)\b", re.IGNORECASE)


def query_terms(text: str) -> list[str]:
    """The terms of a request (its last ``MAX_QUERY_CHARS`` characters). Never from the memo of short texts, which
    callers' endless requests would churn: it is the tools' (their ids, names and parameters)."""
    return _terms(text[-MAX_QUERY_CHARS:])


def query_parts(text: str) -> list[list[str]]:
    """The terms of each part of a request that asks for several things ("First, the factorial of 7. Then find
    me a flute"), its last ``MAX_PARTS`` parts of two terms or more; none for a request of one part."""
    parts = [_terms(part) for sentence in _SENTENCE_END.split(text[-MAX_QUERY_CHARS:])
             for part in _NEXT_ASK.split(sentence)]
    parts = [part for part in parts if len(part) >= 2]
    return parts[-MAX_PARTS:] if len(parts) >= 2 else []


def tool_terms(described: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The weighted terms of a tool, from its listing entry (``Tool.describe``: what a caller sees of it), and
    what tells it from another of its name offered twice: its description's first ``ALIKE_TERMS`` distinct terms."""
    fields: dict[str, list[str]] = {
        "id": terms(str(described.get("id", ""))),
        "name": terms(str(described.get("name", ""))),
        "description": terms(str(described.get("ai_description", ""))),
        "user_description": terms(str(described.get("user_description", ""))),
        "label": terms(" ".join(map(str, [*described.get("tags", ()), *described.get("toolsets", ())]))),
        "parameter": [],
        "parameter_description": [],
        "value": [],
    }
    for name, schema in _parameters(described.get("input_schema"), 0):
        fields["parameter"] += terms(name)
        if isinstance(schema.get("description"), str):
            fields["parameter_description"] += terms(schema["description"])
        if values := _values(schema):
            fields["value"] += terms(values)
    document = [term for field, found in fields.items() for term in found * WEIGHTS[field]]
    return document, list(islice(dict.fromkeys(fields["description"]), ALIKE_TERMS))


def _parameters(schema: Any, depth: int) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(name, schema) of each property, nested objects' and array items' too, down to ``MAX_DEPTH``."""
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return
    properties = schema.get("properties")
    for name, sub in (properties.items() if isinstance(properties, Mapping) else ()):
        if isinstance(sub, Mapping):
            yield str(name), sub
            yield from _parameters(sub, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _parameters(items, depth + 1)


def _values(schema: Mapping[str, Any]) -> str:
    """The string values a parameter's schema names, its array items' too, as one text (an enum of 100,000 values
    is read as far as one field's ``MAX_FIELD_CHARS``: ``words`` cuts it)."""
    found: list[str] = []
    for node in (schema, schema.get("items")):
        for key in VALUES if isinstance(node, dict) else ():  # a listing entry's schemas are JSON: dicts
            value = node.get(key)
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, list):
                found += [item for item in value if isinstance(item, str)]
    return " ".join(found)


def tool_text(described: Mapping[str, Any]) -> str:
    """What a dense model reads of a tool (``gateway.search.dense``): its name's words and its description. Not
    its parameters, which BM25 reads: a vector that is the mean of its tokens' blurs the more it reads, and with them
    the tune split's recall@5 was 0.895 against 0.908 without (``docs/search.md``)."""
    text = " ".join([*words(str(described.get("name", ""))), str(described.get("ai_description", ""))])
    return text[:MAX_FIELD_CHARS]
