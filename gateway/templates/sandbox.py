"""The Jinja sandbox templates run in, with what each operation may make bounded *before* it is made.

Jinja's sandbox keeps a template away from Python's internals, but not from computing: ``'x' * 10**9``,
``9 ** 30000000``, ``'%099999999d' % 1``, ``'x'|center(10**9)`` or a join of a list of long strings each take
seconds and gigabytes in one C call, which no thread or timeout can interrupt; Jinja even computes constant
expressions while compiling. Here every operation that can grow a value checks the size it would make first
(``gateway.templates.limits``: one string, list or integer) and reports to the render's budget
(``gateway.templates.budget``: time, everything made).

The checks sit where every operation passes: arithmetic (``intercepted_binops`` → ``call_binop``; an
intercepted operator is also never folded at compile time), calls (``call``: str methods that pad, replace,
join, translate; ``str.format`` through a bounded formatter), every filter (``gateway.templates.filters``),
``~`` and ``for`` (rewritten at compile time to pass through a guard: a loop ticks the clock at every item, even
with an empty body), and the output (``finalize``, ``concat``).

Python ints, strings and lists are the only growing values a template can make: the environment has no
globals (no ``range``), and the immutable sandbox forbids ``append``, ``update`` and their kin.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

from .budget import INLINE_MAX_INPUT, SliceSpent, current
from .filters import bounded_filters, dumps
from .limits import (
    MAX_SIZE,
    check,
    check_addition,
    check_format_spec,
    check_join,
    check_percent,
    check_power,
    check_product,
    check_replace,
    check_strip_chars,
    check_width,
    measured,
    too_large,
)

LOOP_FILTER, CONCAT_FILTER = "_bounded_loop", "_bounded_concat"


def _check_method(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Check a call of a str/bytes/int method that can grow its result; the (possibly materialised) args."""
    owner, name = method.__self__, method.__name__
    if name in ("center", "ljust", "rjust", "zfill") and args:
        check_width(f"{name}({args[0]!r})", args[0])
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tabsize, int):
            check("expandtabs", len(owner) + owner.count("\t" if isinstance(owner, str) else b"\t") * tabsize)
    elif name == "replace" and len(args) >= 2:
        check_replace(owner, *args[:3])
    elif name == "join" and args:
        items = list(args[0])
        check_join(owner, items)
        args = (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        check("translate", len(owner) * max(longest, 1))
    elif name in ("strip", "lstrip", "rstrip") and args:
        check_strip_chars(args[0])
    elif name == "to_bytes":
        length = args[0] if args else kwargs.get("length", 1)
        check_width("to_bytes", length)
    return args


def _makes_new(method: Any) -> bool:
    owner = getattr(method, "__self__", None)
    return isinstance(owner, (str, bytes, int)) or getattr(method, "__name__", "") in ("copy", "fromkeys")


class _BoundedFormatter(SandboxedFormatter):
    """``str.format`` of the sandbox, checking each field's spec and spending each field's text."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        current().tick()
        check_format_spec(format_spec)
        return measured(super().format_field(value, format_spec), "str.format")


class _BoundedEscapeFormatter(_BoundedFormatter, SandboxedEscapeFormatter):
    pass


def _loop(iterable: Any) -> Iterable[Any]:
    budget = current()
    for item in iterable:
        budget.tick()
        yield item


def _concat(values: list[Any]) -> str:
    texts = [value if isinstance(value, str) else str(value) for value in values]
    check("'~'", sum(map(len, texts)))
    return measured("".join(texts), "'~'")


class _Guards(NodeTransformer):
    """Rewrites what the sandbox cannot intercept: ``for`` iterates through a guard that ticks the budget at
    each item (even an empty loop body then stops at the deadline), and ``a ~ b`` goes through a checked
    concatenation."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, LOOP_FILTER, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        items = nodes.List(node.nodes, lineno=node.lineno)
        return nodes.Filter(items, CONCAT_FILTER, [], [], None, None, lineno=node.lineno)


def guard(tree: nodes.Template, env: ImmutableSandboxedEnvironment) -> nodes.Template:
    """``tree`` (as parsed) with loops and ``~`` routed through their guards; compile it with ``env``."""
    _Guards().visit(tree)
    tree.set_environment(env)
    return tree


def _capped_concat(pieces: Iterable[str]) -> str:
    """Joins a render's output (and macro, block and ``{% set %}`` bodies), refusing past ``MAX_SIZE`` before
    the join allocates. The pieces are references to strings already made (and counted when made)."""
    pieces = pieces if isinstance(pieces, list) else list(pieces)
    length = sum(map(len, pieces))
    if length > MAX_SIZE:
        raise too_large("the rendered text", length)
    current().spend(length)
    return "".join(pieces)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every growing operation checked; see the module docstring."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})
    concat = staticmethod(_capped_concat)  # type: ignore[assignment]

    def __init__(self, *, finalize: Callable[[Any], Any] | None = None, **options: Any):
        super().__init__(finalize=_bounded_finalize(finalize), **options)
        self.filters = bounded_filters()
        self.filters[LOOP_FILTER] = _loop
        self.filters[CONCAT_FILTER] = _concat
        self.policies["json.dumps_function"] = dumps

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        current().tick()
        if operator == "**":
            check_power(left, right)
        elif operator == "*":
            check_product(left, right)
        elif operator == "+":
            check_addition(left, right)
        elif operator == "%" and isinstance(left, (str, bytes)):
            check_percent(left, right)
        return measured(self.binop_table[operator](left, right), f"'{operator}'")

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        method = isinstance(obj, (types.BuiltinMethodType, types.MethodType))
        owner = getattr(obj, "__self__", None)
        if method and isinstance(owner, (str, bytes, int)):
            if budget.inline and isinstance(owner, (str, bytes)) and len(owner) > INLINE_MAX_INPUT:
                raise SliceSpent  # like a filter's large input: one C call (a split) that nothing can interrupt
            args = _check_method(obj, args, kwargs)
        result = super().call(context, obj, *args, **kwargs)
        if method and _makes_new(obj):
            return measured(result, f"{obj.__name__}()")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """Jinja's sandboxed ``str.format``/``format_map``, through a formatter that bounds each field."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) or value.__name__ not in (
                "format", "format_map") or not isinstance(value.__self__, str):
            return None
        owner = value.__self__
        formatter = (_BoundedEscapeFormatter(self, escape=owner.escape) if isinstance(owner, Markup)
                     else _BoundedFormatter(self))
        as_map = value.__name__ == "format_map"

        def format_(*args: Any, **kwargs: Any) -> str:
            if as_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            return type(owner)(formatter.vformat(owner, args, kwargs))

        return functools.update_wrapper(format_, value)


def _bounded_finalize(inner: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    """Output of ``{{ ... }}``: a value that is not yet text is converted here (Jinja would do it after), so the
    text it makes is counted (a loop printing a large list would otherwise make a copy per item, uncounted)."""

    def finalize(value: Any) -> str:
        if inner is not None:
            value = inner(value)
        if type(value) is str:  # already made (and counted), or given: nothing new
            return value
        text = str(value)
        if len(text) > MAX_SIZE:
            raise too_large("the output", len(text))
        current().spend(len(text))
        return text

    return finalize

