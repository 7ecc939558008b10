"""The template helpers the HTTP binding (and the LLM loop's provider keys) use: typed leaves, omission, the
sandbox, static references, secrets and their redaction, and JSON selection."""

from __future__ import annotations

import pytest
from http_tools import http_tool

from gateway import secrets
from gateway.bindings.jsonselect import SelectorInvalid, compile_selector
from gateway.invoke import invoke
from gateway.templates.compile import OMIT, RenderError, TemplateInvalid, compile_template, compile_value


def test_sole_expression_keeps_its_type_and_text_stays_text():
    """`{{ expr }}` alone yields the value itself; anything around it makes a string."""
    scope = {"args": {"n": 3, "tags": ["a", "b"]}}
    assert compile_value("{{ args.tags }}").render(scope) == ["a", "b"]
    assert compile_value("{{ args.n * 2 }}").render(scope) == 6
    assert compile_value("n={{ args.n }}").render(scope) == "n=3"
    assert compile_value(" {{ args.n }}").render(scope) == " 3"
    assert compile_template("{{ args.n }}").render(scope) == "3"  # untyped: always text


def test_omitted_argument_omits_unless_defaulted():
    """A value reading an absent argument is OMIT (mappings drop it); `default` and `is defined` decide otherwise."""
    compiled = compile_value({"a": "{{ args.x }}", "b": "x={{ args.x }}", "c": "{{ args.x | default(none) }}",
                              "d": "{% if args.x is defined %}yes{% else %}no{% endif %}", "e": ["{{ args.x }}", 1]})
    assert compiled.render({"args": {}}) == {"c": None, "d": "no", "e": [1]}
    assert compile_value("{{ args.x }}").render({"args": {}}) is OMIT


def test_references_are_found_statically():
    """Compiling finds which arguments, secrets and context fields a template reads."""
    template = compile_template("{{ args.a }}{{ args['b'] }}{{ secrets.KEY }}{{ context.user }}"
                                "{% for i in args.c %}{{ i }}{% endfor %}")
    refs = template.references
    assert (refs.args, refs.secrets, refs.context) == ({"a", "b", "c"}, {"KEY"}, {"user"})


@pytest.mark.parametrize(("source", "fragment"), [
    ("{{ secrets[args.name] }}", "secrets must be named literally"),
    ("{{ secrets | list }}", "secrets must be named literally"),
    ("{{ range(3) }}", "unknown name(s) 'range'"),
    ("{{ cycler.__init__.__globals__ }}", "unknown name(s) 'cycler'"),
    ("{% for x in args.l %}", "template syntax error"),
])
def test_unsafe_or_broken_templates_do_not_compile(source, fragment):
    """Dynamic secret names, globals outside args/secrets/context, and syntax errors are compile-time errors."""
    with pytest.raises(TemplateInvalid, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        compile_template(source)


@pytest.mark.parametrize("source", ["{{ args.l.append(1) }}", "{{ args.s.__class__.__mro__ }}"])
def test_sandbox_refuses_mutation_and_internals(source):
    """The sandbox forbids changing arguments and reaching Python internals: rendering raises RenderError."""
    with pytest.raises(RenderError, match="SecurityError"):
        compile_value(source).render({"args": {"l": [], "s": "x"}})


def test_mapping_members_are_data_not_methods():
    """`x.items` on a mapping is its "items" key (or nothing), never the dict method, so no dict method runs."""
    arguments = {"items": [1, 2], "d": {}}
    assert compile_value("{{ args.items }}").render({"args": arguments}) == [1, 2]
    assert compile_template("{{ args['items'] | join(',') }}").render({"args": arguments}) == "1,2"
    assert compile_value("{{ args.d.update({'a': 1}) }}").render({"args": arguments}) is OMIT
    assert compile_template("{{ result.keys }}", {"result"}).render({"result": {"keys": "k"}}) == "k"
    assert arguments == {"items": [1, 2], "d": {}}


async def test_template_failure_at_call_time_is_an_error_result(upstream, build_tools):
    """A template that fails while rendering gives an error result naming the part of the request."""
    catalog = build_tools(http_tool({"url": upstream.at("/echo/x"), "json": {"v": "{{ args.l.append(1) }}"}},
                                    {"l": {"type": "array"}}))
    result = await invoke(catalog, "t", {"l": []})
    assert result.is_error and "the template for the json body failed: SecurityError" in result.text


def test_provider_key_style_use():
    """A settings value like `{{ secrets.OPENAI_API_KEY }}` compiles to a template whose secrets resolve by name."""
    template = compile_template("Bearer {{ secrets.PROVIDER_KEY }}", names={"secrets"})
    values = secrets.resolve(template.references.secrets, {"PROVIDER_KEY": "sk-123456"})
    assert template.render({"secrets": values}) == "Bearer sk-123456"
    with pytest.raises(secrets.SecretsMissing, match="PROVIDER_KEY"):
        secrets.resolve(template.references.secrets, {})


def test_redaction_covers_plain_and_url_encoded_values():
    """A secret's value is replaced by its name, as is and percent-encoded; very short values are left alone."""
    values = {"TOKEN": "a/b c+d", "PIN": "12"}
    assert secrets.redact("x a/b c+d y a%2Fb%20c%2Bd z 12", values) == "x [secret TOKEN] y [secret TOKEN] z 12"
    assert secrets.redact_value({"k": ["a/b c+d"]}, values) == {"k": ["[secret TOKEN]"]}


def test_secrets_are_redacted_from_http_library_logs(caplog, monkeypatch):
    """Log lines of httpx (which print request URLs) have remembered secrets' values redacted."""
    import logging

    monkeypatch.setenv("HTTP_LOGGED_KEY", "logged-secret-value")
    secrets.remember({"HTTP_LOGGED_KEY"})
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info("HTTP Request: GET %s", "http://h/?key=logged-secret-value")
    assert caplog.messages == ["HTTP Request: GET http://h/?key=[secret HTTP_LOGGED_KEY]"]


def test_selector_syntax_errors():
    """A selector that is neither a JSON pointer nor a valid path is refused when compiled."""
    for bad in ("items[0]", "$.a..b", "$[x]", "/a~2"):
        with pytest.raises(SelectorInvalid):
            compile_selector(bad)
