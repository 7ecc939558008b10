"""Jinja2 templates in definitions: sandboxed, compiled once, rendered with data that is never a template.

A template sees only the names it is given — for a request ``args``, ``secrets`` and ``context`` — and what it
reads from them is found statically when it is compiled, so a typo or a reference to an undeclared argument is
a load-time problem, not a call-time surprise. Secrets must be named literally (``secrets.NAME``): a template
can never pick an environment variable by an argument's value.

    compile_value(value, names)      a YAML value (a string, or mappings and lists holding strings) → Compiled
    compiled.render(scope)           the value with every template rendered; OMIT where nothing is left

Rendering rules:

- A string that is exactly one ``{{ expression }}`` keeps the expression's type: ``"{{ args.tags }}"`` is the
  list itself, not ``"['a', 'b']"``. Any other string renders to a string.
- A string depending on an argument that was not given renders to ``OMIT``, and mappings and lists drop it, so
  an omitted optional argument removes its key instead of sending ``""``. ``{{ args.x | default(0) }}`` and
  ``{% if args.x is defined %}`` choose otherwise.
- Argument values are inserted as data: a value containing ``{{ ... }}`` is sent as those characters.
- ``x.name`` on a mapping reads its key ``name`` and nothing else: ``result.items`` is the answer's "items"
  member, not the dict method (iterate a mapping with ``| items`` or ``| dictsort``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.environment import Template as JinjaTemplate
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.runtime import Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .budget import bounded, compiling
from .sandbox import BoundedSandbox, guard

Path = tuple[str | int, ...]
REQUEST_NAMES = frozenset({"args", "secrets", "context"})
CONTEXT_FIELDS = frozenset({"conversation_id", "user", "tool_call_id"})
_MARKERS = ("{{", "{%", "{#")
_SOLE_EXPRESSION = re.compile(r"^\{\{.*\}\}$", re.DOTALL)


class _Omitted:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omitted()


class TemplateInvalid(Exception):
    """Every problem found while compiling one value, each as (path inside the value, message)."""

    def __init__(self, problems: list[tuple[Path, str]]):
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


class RenderError(Exception):
    """A template failed while rendering (a type error in an expression, a sandbox violation)."""


class _DataEnvironment(BoundedSandbox):
    """The sandbox (with what templates compute bounded: gateway.templates.sandbox), reading mappings as JSON data: ``x.name`` is the key ``name`` (Jinja would prefer a dict
    attribute, so an argument called ``items`` or ``keys`` would render as a method)."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict):
            return obj[attribute] if attribute in obj else self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def is_template(text: str) -> bool:
    """Whether ``text`` holds Jinja markup (an expression, a statement or a comment)."""
    return any(marker in text for marker in _MARKERS)


def environment(finalize: Callable[[Any], Any] | None = None) -> ImmutableSandboxedEnvironment:
    """A sandboxed environment in which an undefined name is an error, never an empty string.

    Jinja's globals (range, dict, cycler, namespace, …) are removed: a template reads the names it is given
    and nothing else, which is what makes its references checkable when it is compiled.
    """
    env = _DataEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True,
                           finalize=finalize)
    env.globals.clear()
    return env


DEFAULT_ENV = environment()


@dataclass(frozen=True)
class References:
    """What a template reads: names of arguments, secrets and context fields, and names it uses whole."""

    args: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()
    context: frozenset[str] = frozenset()
    whole: frozenset[str] = frozenset()  # e.g. ``{{ args | tojson }}``


@dataclass(frozen=True)
class Template:
    """One string from a definition. Constant strings are kept as they are and never go through Jinja."""

    path: Path
    source: str
    references: References
    _template: JinjaTemplate | None = None
    _expression: Callable[..., Any] | None = None
    # (name, key) for the common ``{{ args.x }}``: read directly, as Jinja would, at a fraction of its cost.
    _lookup: tuple[str, str] | None = None

    def render(self, scope: Mapping[str, Any]) -> Any:
        """The rendered value, or ``OMIT`` when it depends on something the scope does not hold."""
        if self._lookup is not None:
            name, key = self._lookup
            return scope[name].get(key, OMIT)
        try:
            with bounded():  # the budget of the render this is part of, or one of its own
                if self._expression is not None:
                    value = self._expression(**scope)
                    return OMIT if isinstance(value, Undefined) else value
                if self._template is not None:
                    return self._template.render(scope)
        except UndefinedError:
            return OMIT
        except (SecurityError, TemplateError, ArithmeticError, TypeError, ValueError, LookupError,
                RecursionError) as exc:
            raise RenderError(f"{type(exc).__name__}: {exc}") from None
        return self.source


@dataclass(frozen=True)
class Compiled:
    """A compiled YAML value: its shape, with a ``Template`` at every string."""

    tree: Any

    def templates(self) -> Iterator[Template]:
        yield from _templates(self.tree)

    @property
    def references(self) -> References:
        return merge(t.references for t in self.templates())

    def render(self, scope: Mapping[str, Any]) -> Any:
        return _render(self.tree, scope)


def compile_value(value: Any, names: Collection[str] = REQUEST_NAMES, *,
                  env: ImmutableSandboxedEnvironment = DEFAULT_ENV, typed: bool = True) -> Compiled:
    """Compile every string in ``value``; raise ``TemplateInvalid`` with every problem found.

    ``typed`` lets a string that is one ``{{ expression }}`` keep the expression's type (for JSON bodies and
    parameters); without it every template renders to text (for a URL path).
    """
    problems: list[tuple[Path, str]] = []
    tree = _compile(value, (), names, env, typed, problems)
    if problems:
        raise TemplateInvalid(problems)
    return Compiled(tree)


def compile_template(source: str, names: Collection[str] = REQUEST_NAMES, *,
                     env: ImmutableSandboxedEnvironment = DEFAULT_ENV, typed: bool = False) -> Template:
    """Compile one string (a URL path, a body text, a provider's API key); raise ``TemplateInvalid``."""
    return compile_value(source, names, env=env, typed=typed).tree


def merge(references: Iterator[References] | list[References]) -> References:
    args, secrets, context, whole = set(), set(), set(), set()
    for r in references:
        args |= r.args
        secrets |= r.secrets
        context |= r.context
        whole |= r.whole
    return References(frozenset(args), frozenset(secrets), frozenset(context), frozenset(whole))


def _compile(value: Any, path: Path, names: Collection[str], env: ImmutableSandboxedEnvironment, typed: bool,
             problems: list[tuple[Path, str]]) -> Any:
    if isinstance(value, dict):
        return {key: _compile(item, (*path, key), names, env, typed, problems) for key, item in value.items()}
    if isinstance(value, list):
        return [_compile(item, (*path, i), names, env, typed, problems) for i, item in enumerate(value)]
    if not isinstance(value, str):
        return value
    if not is_template(value):
        return Template(path, value, References())
    try:
        return _compile_text(value, path, names, env, typed, problems)
    except TemplateSyntaxError as exc:
        where = f" (line {exc.lineno} of the template)" if "\n" in value.strip() else ""
        problems.append((path, f"template syntax error{where}: {exc.message}"))
    except (RecursionError, SyntaxError) as exc:  # Jinja's parser, or Python compiling what Jinja generated
        problems.append((path, f"the template is nested too deeply to compile ({type(exc).__name__}: {exc})"))
    return None


def _compile_text(value: str, path: Path, names: Collection[str], env: ImmutableSandboxedEnvironment,
                  typed: bool, problems: list[tuple[Path, str]]) -> Template | None:
    # Generated definitions (an OpenAPI source's 500 operations) repeat the same few templates ("{{ args.id }}",
    # "{{ secrets.KEY }}"): each text is parsed and compiled once per process, then placed at each path.
    template, found = _compiled_text(value, frozenset(names), env, typed)
    problems += [(path, message) for message in found]
    return dataclasses.replace(template, path=path) if template is not None else None


@functools.lru_cache(maxsize=4096)
def _compiled_text(value: str, names: frozenset[str], env: ImmutableSandboxedEnvironment,
                   typed: bool) -> tuple[Template | None, tuple[str, ...]]:
    """A template text compiled (at the empty path), or the problems it has; raises what Jinja raises."""
    tree = env.parse(value)
    references, found = _references(tree, names)
    if found:
        return None, tuple(found)
    path: Path = ()
    expression = tree.body[0].nodes[0] if typed and _is_sole_expression(value, tree) else None
    lookup = _lookup(expression) if expression is not None else None
    if lookup is not None and lookup[0] in REQUEST_NAMES:  # names always bound to a mapping
        return Template(path, value, references, _lookup=lookup), ()
    with compiling(value):  # Jinja computes constant parts now: within what the sandbox allows
        if expression is not None:  # as Jinja's compile_expression does, from the tree already parsed
            body = nodes.Template([nodes.Assign(nodes.Name("result", "store"), expression, lineno=1)], lineno=1)
            compiled = TemplateExpression(env.from_string(guard(body, env)), undefined_to_none=False)
            return Template(path, value, references, _expression=compiled), ()
        return Template(path, value, references, _template=env.from_string(guard(tree, env))), ()


def _is_sole_expression(source: str, tree: nodes.Template) -> bool:
    """Whether a string is exactly ``{{ expression }}``."""
    body = tree.body
    if _SOLE_EXPRESSION.match(source) is None or len(body) != 1 or not isinstance(body[0], nodes.Output):
        return False
    return len(body[0].nodes) == 1 and not isinstance(body[0].nodes[0], nodes.TemplateData)


def _lookup(expression: nodes.Node) -> tuple[str, str] | None:
    """(name, key) when ``expression`` is ``name.key`` or ``name['key']``, else None."""
    if isinstance(expression, (nodes.Getattr, nodes.Getitem)) and isinstance(expression.node, nodes.Name):
        key = expression.attr if isinstance(expression, nodes.Getattr) else _constant(expression.arg)
        if isinstance(key, str):
            return expression.node.name, key
    return None


def _references(tree: nodes.Template, names: Collection[str]) -> tuple[References, list[str]]:
    problems = []
    unknown = sorted(meta.find_undeclared_variables(tree) - set(names))
    if unknown:
        allowed = ", ".join(sorted(names))
        listed = ", ".join(repr(n) for n in unknown)
        problems.append(f"unknown name(s) {listed} in template (it may use: {allowed})")
    found: dict[str, set[str]] = {"args": set(), "secrets": set(), "context": set()}
    whole: set[str] = set()

    def visit(node: nodes.Node) -> None:
        lookup = _lookup(node)
        if lookup is not None and lookup[0] in found:
            found[lookup[0]].add(lookup[1])
            return
        target = node.node if isinstance(node, (nodes.Getattr, nodes.Getitem)) else None
        if isinstance(target, nodes.Name) and target.name == "secrets":
            problems.append("secrets must be named literally (secrets.NAME), not chosen by an expression")
            return
        if isinstance(node, nodes.Name) and node.ctx == "load" and node.name in found:
            if node.name == "secrets":
                problems.append("secrets must be named literally (secrets.NAME), not used as a whole")
            whole.add(node.name)
        for child in node.iter_child_nodes():
            visit(child)

    visit(tree)
    unknown_context = sorted(found["context"] - CONTEXT_FIELDS)
    if unknown_context:
        problems.append(f"unknown context field(s) {', '.join(unknown_context)} "
                        f"(known: {', '.join(sorted(CONTEXT_FIELDS))})")
    references = References(frozenset(found["args"]), frozenset(found["secrets"]),
                            frozenset(found["context"]), frozenset(whole))
    return references, problems


def _constant(node: nodes.Node) -> Any:
    return node.value if isinstance(node, nodes.Const) else None


def _templates(tree: Any) -> Iterator[Template]:
    if isinstance(tree, Template):
        yield tree
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _templates(item)
    elif isinstance(tree, list):
        for item in tree:
            yield from _templates(item)


def _render(tree: Any, scope: Mapping[str, Any]) -> Any:
    if isinstance(tree, Template):
        return tree.render(scope)
    if isinstance(tree, dict):
        rendered = ((key, _render(item, scope)) for key, item in tree.items())
        return {key: value for key, value in rendered if value is not OMIT}
    if isinstance(tree, list):
        return [value for value in (_render(item, scope) for item in tree) if value is not OMIT]
    return tree
