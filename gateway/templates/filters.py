"""Jinja's filters (and ``b64encode``), bounded: each one's arguments checked before it runs (a width, a padding, a number of
slices, a sort's length) and its result measured after; ``join``, ``striptags`` and ``pprint`` replaced by
versions that estimate first, run in one pass, or stop at the limit, and ``tojson`` given a ``dumps`` that
stops at the limit when it indents."""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable
from pprint import PrettyPrinter
from typing import Any

from jinja2 import pass_environment, pass_eval_context
from jinja2.filters import FILTERS, make_attrgetter
from markupsafe import Markup, soft_str

from .budget import INLINE_MAX_INPUT, SliceSpent, current
from .limits import (
    CappedText,
    check,
    check_join,
    check_percent,
    check_replace,
    check_scanned,
    check_sortable,
    check_strip_chars,
    check_sum_start,
    check_width,
    measured,
    size,
)

_WORD = re.compile(r"\w+")  # jinja2.filters' word, for wordcount

# Results of these filters are (parts of) their input, not something new: they are not measured.
_SELECTING_FILTERS = frozenset({"first", "last", "random", "min", "max", "default", "d", "attr", "safe", "count",
                                "length", "wordcount", "int", "float", "abs", "round", "filesizeformat"})


@pass_eval_context
def _filter_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is not None:
        items = list(map(make_attrgetter(eval_ctx.environment, attribute), items))
    texts = [item if isinstance(item, str) else str(item) for item in items]
    check_join(d, texts)
    return str(d).join(texts)


def _filter_striptags(value: Any) -> str:
    """Jinja's ``striptags`` (comments, then tags removed; whitespace collapsed; entities unescaped), in one
    pass: the original removes one tag at a time by copying the whole text, quadratic in the number of tags."""
    text = value.__html__() if hasattr(value, "__html__") else str(value)
    for start_mark, end_mark in (("<!--", "-->"), ("<", ">")):
        kept, position = [], 0
        while (start := text.find(start_mark, position)) != -1:
            end = text.find(end_mark, start)
            if end == -1:
                break
            kept.append(text[position:start])
            position = end + len(end_mark)
        kept.append(text[position:])
        text = "".join(kept)
    return Markup(" ".join(text.split())).unescape()


def _filter_wordcount(value: Any) -> int:
    """Jinja's ``wordcount`` one word at a time: Jinja's ``findall`` makes every word in one C call that holds
    the GIL (and so the event loop) for as long as it runs, even in a worker thread."""
    return sum(1 for _ in _WORD.finditer(soft_str(value)))


def _filter_pprint(value: Any) -> str:
    stream = CappedText()
    PrettyPrinter(stream=stream).pprint(value)
    return "".join(stream.parts).rstrip("\n")


def dumps(value: Any, **options: Any) -> str:
    """JSON for ``tojson``: in one C call without ``indent`` (its size is then a few times its input's); with
    ``indent``, chunk by chunk, stopping at the limit (the indentation grows with depth times length)."""
    if options.get("indent") is None:
        return json.dumps(value, **options)
    stream = CappedText()
    for chunk in json.JSONEncoder(**options).iterencode(value):
        stream.write(chunk)
    return "".join(stream.parts)


def _wordwrap_cost(s: Any, width: int = 79, break_long_words: bool = True, wrapstring: str | None = None,
                   *_: Any, **__: Any) -> None:
    text = str(s)
    check_scanned("wordwrap", text)
    words = text.split()
    longest = max(map(len, words), default=0)
    width = max(width, 1) if isinstance(width, int) else 1
    # textwrap cuts a long word one line at a time, copying the rest of the word each time.
    check("wordwrap", len(text) * longest / width if break_long_words else 0)
    check("wordwrap", len(text) * (1 + len(wrapstring or "\n")))


def _indent_cost(s: Any, width: Any = 4, **_: Any) -> None:
    text = str(s)
    step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    check("indent", len(text) + (text.count("\n") + 1) * step)


# name -> check of the filter's arguments (bound to its parameter names) before it runs.
_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "center": lambda value, width=80: check_width(f"center({width!r})", width),
    "indent": _indent_cost,
    "format": lambda value, *args, **kwargs: check_percent(str(value), kwargs or args),
    "wordwrap": lambda environment, s, *args, **kwargs: _wordwrap_cost(s, *args, **kwargs),
    "replace": lambda eval_ctx, s, old, new, count=None: check_replace(s, old, new, -1 if count is None else count),
    "batch": lambda value, linecount, fill_with=None: check_width(f"batch({linecount!r})", linecount),
    "slice": lambda eval_ctx, value, slices, fill_with=None: check_width(f"slice({slices!r})", slices),
    "trim": lambda value, chars=None: check_strip_chars(chars),
    "dictsort": lambda value, *args, **kwargs: check_sortable(value),
    "title": lambda s: check_scanned("title", str(s)),
    "urlize": lambda eval_ctx, value, *args, **kwargs: check_scanned("urlize", str(value)),
    "sum": lambda environment, iterable, attribute=None, start=0: check_sum_start(start),
}
def _sorting(function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that sorts its input (``sort``, ``groupby``), given it as a list of at most MAX_SORTED items."""

    @pass_environment
    @functools.wraps(function)
    def sorting(environment: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        items = list(value)
        check_sortable(items)
        return function(environment, items, *args, **kwargs)

    return sorting


_REPLACED_FILTERS: dict[str, Callable[..., Any]] = {"join": _filter_join, "striptags": _filter_striptags,
                                                    "pprint": _filter_pprint, "wordcount": _filter_wordcount,
                                                    "sort": _sorting(FILTERS["sort"]),
                                                    "groupby": _sorting(FILTERS["groupby"])}


def _guarded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    check = _FILTER_CHECKS.get(name)
    measure = name not in _SELECTING_FILTERS
    value_at = 0 if getattr(function, "jinja_pass_arg", None) is None else 1  # after what Jinja passes first

    @functools.wraps(function)  # keeps jinja_pass_arg, so Jinja passes the context as before
    def guarded(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        if budget.inline and len(args) > value_at and size(args[value_at], INLINE_MAX_INPUT) > INLINE_MAX_INPUT:
            raise SliceSpent  # a large input: this filter runs in a worker thread, where it can be interrupted
        if check is not None:
            check(*args, **kwargs)
        result = function(*args, **kwargs)
        return measured(result, f"the filter '{name}'") if measure else result

    return guarded


def _b64encode(value: Any) -> str:
    """Base64 of a text's UTF-8 bytes, e.g. for a Basic credential: ``('user:' ~ secrets.PASSWORD)|b64encode``."""
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return base64.b64encode(data).decode("ascii")


def bounded_filters() -> dict[str, Callable[..., Any]]:
    """Every Jinja filter and ``b64encode``, guarded; ``join``, ``striptags`` and ``pprint`` replaced first."""
    replaced = {name: _REPLACED_FILTERS.get(name, function) for name, function in {**FILTERS,
                                                                                  "b64encode": _b64encode}.items()}
    return {name: _guarded_filter(name, function) for name, function in replaced.items()}
