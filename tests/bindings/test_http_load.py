"""Mistakes in an HTTP binding are load-time problems, each at its YAML node (file:line:col), all at once."""

from __future__ import annotations

import pytest
from support import catalog_for

from gateway.errors import DefinitionsInvalid

BROKEN = r"""
tools:
  - id: syntax
    name: T
    user_description: u
    ai_description: a
    input_schema: {type: object, properties: {x: {type: string}}}
    binding:
      http:
        url: http://127.0.0.1:9/a
        json:
          good: "{{ args.x }}"
          bad: "{{ args.x "
  - id: names
    name: T
    user_description: u
    ai_description: a
    input_schema: {type: object, properties: {x: {type: string}, z: {type: integer}}}
    binding:
      http:
        url: http://127.0.0.1:9/a/{{ args.y }}
        query:
          env: "{{ os.environ }}"
          key: "{{ secrets[args.x] }}"
          who: "{{ context.password }}"
          "{{ args.x }}": keyed
        response:
          template: "{{ secrets.TOKEN }}"
  - id: origin
    name: T
    user_description: u
    ai_description: a
    binding:
      http:
        url: "http://{{ args.x }}.example.com/a"
  - id: glued
    name: T
    user_description: u
    ai_description: a
    binding:
      http:
        url: "http://example.com{{ args.path }}"
  - id: urlbits
    name: T
    user_description: u
    ai_description: a
    binding:
      http:
        url: "http://user:pw@example.com/a?x={{ args.x }}#top"
  - id: unsafe
    name: T
    user_description: u
    ai_description: a
    binding:
      http:
        method: POST
        url: http://example.com/a
        retries: 3
        headers:
          Host: evil.example
          X-Bad: "a\r\nX-Injected: 1"
        response:
          select: "stations[0]"
  - id: shape
    name: T
    user_description: u
    ai_description: a
    binding:
      http:
        url: http://example.com/a
        timeout: 5
        json: {a: 1}
        text: hi
        response:
          selct: /a
          expect: text
"""

# (line, column, fragment of the message) for each mistake in BROKEN.
EXPECTED = [
    (12, 16, "template syntax error: unexpected end of template"),
    (20, 14, "template reads argument 'y', which is not in input_schema.properties (declared: x, z)"),
    (22, 16, "unknown name(s) 'os' in template (it may use: args, context, secrets)"),
    (23, 16, "secrets must be named literally (secrets.NAME), not chosen by an expression"),
    (24, 16, "unknown context field(s) password"),
    (25, 11, "'{{ args.x }}' is a key, and keys are not templates: only values are"),
    (27, 21, "unknown name(s) 'secrets' in template (it may use: args, context, result, status)"),
    (34, 14, "the url's scheme, host and port are fixed: templates may appear in its path only"),
    (41, 14, "the url's scheme, host and port are fixed"),
    (48, 14, "credentials in the url"),
    (48, 14, "templates in the url's query string: put templated parameters under 'query'"),
    (48, 14, "the url's fragment '#top' is never sent"),
    (57, 18, "retries resend the request, which is not safe for POST: set 'retry_unsafe: true'"),
    (59, 11, "header 'Host' is set by the gateway"),
    (60, 18, "header 'X-Bad' holds a line break or control character"),
    (62, 19, "invalid selector 'stations[0]'"),
    (69, 9, "http binding: give at most one body (json, form or text)"),
    (70, 9, "unknown key 'timeout' in tools[6].binding.http"),
    (74, 11, "unknown key 'selct' in tools[6].binding.http.response"),
]


@pytest.fixture(scope="module")
def problems(tmp_path_factory) -> list:
    root = tmp_path_factory.mktemp("defs")
    (root / "broken.yaml").write_text(BROKEN.lstrip("\n"), encoding="utf-8")
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(root)
    return list(caught.value.problems)


@pytest.mark.parametrize(("line", "column", "fragment"), EXPECTED, ids=[f"{r[0]}:{r[1]}" for r in EXPECTED])
def test_each_mistake_is_reported_at_its_node(problems, line, column, fragment):
    """Every kind of HTTP binding mistake is an error at the line and column of the node that is wrong."""
    matching = [p for p in problems if (p.file, p.line, p.column) == ("broken.yaml", line, column)
                and fragment in p.message and p.severity == "error"]
    assert matching, f"no problem at {line}:{column} with {fragment!r}; got:\n" + "\n".join(map(str, problems))


def test_nothing_else_is_reported(problems):
    """The broken file yields exactly the expected problems: no duplicates, no noise."""
    assert len(problems) == len(EXPECTED)


PROXY_HEADERS = r"""
tools:
  - id: proxied
    name: T
    user_description: u
    ai_description: a
    input_schema: {type: object, properties: {ip: {type: string}, url: {type: string}}}
    binding:
      http:
        url: http://127.0.0.1:9/a
        headers:
          X-Forwarded-For: "{{ args.ip }}"
          x-original-url: "/admin{{ args.url }}"
          Proxy-Authorization: "{{ args | tojson }}"
          Forwarded: "for={{ context.user }}"
          X-Forwarded-Proto: https
          Proxy-Authorization-Note: "by {{ secrets.PROXY_USER }}"
          Keep-Alive: timeout=5
          TE: trailers
"""


def test_proxy_headers_from_arguments_and_connection_headers_are_refused(tmp_path):
    """A YAML binding may fix a proxy-read header (or give it a secret or a context field) but never take it from
    an argument, and never declares a hop-by-hop one; one list with OpenAPI's, in any case."""
    (tmp_path / "proxied.yaml").write_text(PROXY_HEADERS.lstrip("\n"), encoding="utf-8")
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(tmp_path)
    errors = [(p.line, p.message) for p in caught.value.problems if p.severity == "error"]
    assert [line for line, _ in errors] == [11, 12, 13, 17, 18], errors
    assert all("an argument cannot set it" in message for _, message in errors[:3]), errors
    assert all("is set by the gateway" in message for _, message in errors[3:]), errors
