"""What a sandboxed template may compute: sizes checked before a value is made, at compile and at render time,
a time budget for loops and recursion, and renders that leave the event loop free (issue 10, item 3)."""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest
from jinja2 import Environment

from gateway.templates import budget
from gateway.templates.budget import run_bounded
from gateway.templates.compile import DEFAULT_ENV, RenderError, TemplateInvalid, compile_template, compile_value
from gateway.templates.limits import MAX_SIZE

TOO_COSTLY = "TemplateTooCostly"

# Each would make tens or hundreds of megabytes (or run for seconds) in one Python call without the checks.
COSTLY = {
    "repeat a string": ("{{ 'x' * 10**8 }}", {}),
    "repeat a list": ("{{ [1] * 5000000 }}", {}),
    "power from arguments": ("{{ (args.p|int) ** (args.v|int) }}", {"p": 9, "v": 1_000_000}),
    "product of products": ("{% set a = 3 ** 10000 %}{% set b = a * a %}{{ b * b }}", {}),
    "percent width": ("{{ '%0100000000d' % 1 }}", {}),
    "format filter width": ("{{ '%0100000000d'|format(1) }}", {}),
    "str.format width": ("{{ '{:>100000000}'.format(1) }}", {}),
    "str.format repeated field": ("{{ ('{0}' * 1000).format(args.s) }}", {"s": "x" * 10_000}),
    "center": ("{{ 'x'|center(100000000) }}", {}),
    "indent": ("{{ 'a\nb'|indent(50000000) }}", {}),
    "ljust": ("{{ 'x'.ljust(100000000) }}", {}),
    "replace": ("{{ ('x' * 10000)|replace('x', 'y' * 10000) }}", {}),
    "str.replace": ("{{ ('x' * 10000).replace('x', 'y' * 10000) }}", {}),
    "join": ("{{ ('y' * 10000).join(('x' * 10000)|list) }}", {}),
    "join filter": ("{{ ([args.s] * 1000)|join(args.s) }}", {"s": "x" * 10_000}),
    "concatenation": ("{% set a = 'x' * 1000000 %}{{ a ~ a ~ a }}", {}),
    "addition": ("{% set a = 'x' * 1000000 %}{{ a + a }}", {}),
    "batch padding": ("{{ [0]|batch(10000000, 0)|list }}", {}),
    "slices": ("{{ [0]|slice(2000000)|list }}", {}),
    "tojson indent": ("{{ args.d|tojson(indent=10000000) }}", {"d": {"a": [1]}}),
    "sum of lists": ("{{ args.l|sum(start=[]) }}", {"l": [[1]] * 3000}),
    "wordwrap of a long word": ("{{ ('x' * 50000)|wordwrap(1) }}", {}),
    "urlize of a long text": ("{{ ('see www.example.org ' * 5000)|urlize }}", {}),
    "trim characters": ("{{ ('a' * 1000000)|trim('b' * 300 ~ 'a') }}", {}),
    "sort": ("{{ ('x' * 200000)|list|sort|length }}", {}),
    "output": ("{% for x in args.l %}{{ args.s }}{% endfor %}", {"l": list(range(2000)), "s": "x" * 1000}),
}


@pytest.mark.parametrize(("source", "arguments"), COSTLY.values(), ids=COSTLY.keys())
def test_costly_operations_are_refused_before_they_run(source, arguments):
    """An operation that would make more than a template may make fails the render with a message, at once."""
    template = compile_template(source)
    with pytest.raises(RenderError, match=TOO_COSTLY):
        template.render({"args": arguments})


@pytest.mark.parametrize("source", ["{{ 'x' * 10**9 }}", "{{ 'x'|center(1000000000) }}",
                                    "{{ '%0999999999d' % 1 }}", "{{ [1] * 10**9 }}"])
def test_constants_are_not_computed_when_compiling(source):
    """Jinja folds constant expressions when it compiles: a costly one compiles, and fails when rendered."""
    template = compile_value({"body": source})
    with pytest.raises(RenderError, match=TOO_COSTLY):
        template.render({"args": {}})


@pytest.mark.parametrize("source", [
    "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}",
    "{{ 1" + " + 1" * 20000 + " }}",
    "{% for a in args.l %}" * 25 + "x" + "{% endfor %}" * 25,
])
def test_templates_nested_too_deeply_are_a_compile_problem(source):
    """A template nested deeper than Jinja's parser or Python's compiler can go is a problem, not a crash."""
    with pytest.raises(TemplateInvalid, match="nested too deeply to compile"):
        compile_template(source)


@pytest.mark.parametrize("source", [
    "{% for a in args.l %}{% for b in args.l %}{% endfor %}{% endfor %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(21) }}",
])
def test_long_loops_and_recursion_stop_at_the_time_budget(source):
    """Loops (even with an empty body) and macro recursion stop when the render's time is up."""
    with pytest.raises(RenderError, match="ran longer than"):
        compile_template(source).render({"args": {"l": list(range(8000))}})


def test_ordinary_templates_render_as_before():
    """Widths, padding, formatting, joins and JSON of ordinary sizes are untouched by the limits."""
    scope = {"args": {"n": 7, "names": ["a", "b"], "d": {"k": [1, 2]}, "text": "one two three four"}}
    cases = {
        "{{ '%05d' % args.n }}": "00007",
        "{{ '{:>4}|{:.2f}'.format(args.n, 1.5) }}": "   7|1.50",
        "{{ 'ab'|center(6) }}": "  ab  ",
        "{{ args.names|join(', ') }}": "a, b",
        "{{ args.d|tojson(indent=2) }}": '{\n  "k": [\n    1,\n    2\n  ]\n}',
        "{{ args.text|wordwrap(9) }}": "one two\nthree\nfour",
        "{{ 'a\nb'|indent(2) }}": "a\n  b",
        "{{ ('x' ~ args.n) * 2 }}": "x7x7",
        "{{ 2 ** 100 }}": str(2 ** 100),
        "{% for x in args.names %}{{ loop.index }}{{ x }}{% endfor %}": "1a2b",
        "{{ args.names|sort(reverse=true)|list }}": "['b', 'a']",
        "{{ '%(a)s-%(b)s'|format(a=1, b=2) }}": "1-2",
        "{{ ('x' * " + str(MAX_SIZE) + ")|length }}": str(MAX_SIZE),
    }
    for source, expected in cases.items():
        assert compile_template(source).render(scope) == expected, source


@pytest.mark.parametrize("html", ["<p>Hello <b>world</b></p>", "a <!-- c <b> --> b", "x < y > z &amp; w",
                                  "<a href='x'>link</a>\n\n<br/>text", "unclosed <tag", "<!-- open"])
def test_striptags_matches_jinja(html):
    """The one-pass striptags gives Jinja's result (Jinja's own copies the text once per tag)."""
    expected = Environment().from_string("{{ html|striptags }}").render(html=html)
    assert compile_template("{{ args.html|striptags }}").render({"args": {"html": html}}) == expected


@pytest.mark.parametrize("text", ["", "one", "Hello, wörld! it's 3 o'clock", "  a\tb\nc  ", "__x__ y_z 42"])
def test_wordcount_matches_jinja(text):
    """The word-at-a-time wordcount gives Jinja's count."""
    expected = Environment().from_string("{{ text|wordcount }}").render(text=text)
    assert compile_template("{{ args.text|wordcount }}").render({"args": {"text": text}}) == expected


def test_striptags_of_many_tags_finishes():
    """A text of 100,000 tags is stripped (one pass) rather than copied once per tag."""
    template = compile_template("{{ args.html|striptags|length }}")
    assert template.render({"args": {"html": "<>" * 100_000 + "end"}}) == "3"


async def _beats_while(render) -> int:
    """How many times a 10 ms heartbeat on the event loop ran while ``render`` ran under ``run_bounded``."""
    beats = 0

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            await asyncio.sleep(0.01)
            beats += 1

    beating = asyncio.create_task(heartbeat())
    try:
        await run_bounded(render)
    finally:
        beating.cancel()
    return beats


async def test_slow_render_leaves_the_event_loop_free():
    """A render that runs long moves to a worker thread: the event loop keeps running meanwhile, and the render
    ends with an error at its time budget."""
    template = compile_template("{% for a in args.l %}{% for b in args.l %}{% endfor %}{% endfor %}")
    failures = []

    def render() -> None:
        try:
            template.render({"args": {"l": list(range(100_000))}})
        except RenderError as exc:
            failures.append(str(exc))

    assert await _beats_while(render) > 0  # the loop ran while the template rendered
    assert failures and "ran longer than" in failures[0]


async def test_filter_over_a_large_input_runs_off_the_event_loop(monkeypatch):
    """One filter call over a large input (striptags of 300 kB: no loop of the template's own to tick) is moved
    to a worker thread before it starts, never run on the event loop."""
    original = DEFAULT_ENV.filters["striptags"]
    on_event_loop = []

    @functools.wraps(original)
    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        on_event_loop.append(threading.current_thread() is threading.main_thread())
        return result

    monkeypatch.setitem(DEFAULT_ENV.filters, "striptags", spy)
    template = compile_template("{{ args.text|striptags|length }}")
    text = "<p>some <b>words</b></p> " * 12_000
    await run_bounded(lambda: template.render({"args": {"text": text}}))
    assert on_event_loop == [False]


async def test_method_over_a_large_input_runs_off_the_event_loop(monkeypatch):
    """One str method call over a large input (split of 300 kB: one C call making many strings) is moved to a
    worker thread before it starts, like a filter, never run on the event loop."""
    original = DEFAULT_ENV.call
    loop_thread = threading.current_thread()
    on_event_loop = []

    def spy(context, obj, /, *args, **kwargs):
        result = original(context, obj, *args, **kwargs)
        if getattr(obj, "__name__", "") == "split":
            on_event_loop.append(threading.current_thread() is loop_thread)
        return result

    monkeypatch.setattr(DEFAULT_ENV, "call", spy)
    template = compile_template("{{ args.text.split()[0] }}")
    await run_bounded(lambda: template.render({"args": {"text": "some words " * 30_000}}))
    assert on_event_loop == [False]


async def test_a_render_that_waited_for_a_thread_names_the_whole_budget():
    """A render that moves to a worker thread carries on with what is left of its budget; the error still names
    the budget it was given (it said 'ran longer than 0.92 s' for a 1 s budget when the threads were busy)."""
    release = threading.Event()
    busy = [budget._THREADS.submit(release.wait) for _ in range(budget._THREADS._max_workers)]

    def forever():
        while True:
            budget.current().tick()

    try:
        render = asyncio.ensure_future(run_bounded(forever))
        await asyncio.sleep(0.3)  # the render waits for a thread: that wait is spent from its budget
        release.set()
        with pytest.raises(Exception, match=r"ran longer than 1 s \(") as raised:
            await render
        assert type(raised.value).__name__ == TOO_COSTLY
    finally:
        release.set()
        for future in busy:
            future.result()
