"""Prompts and resources declared in YAML: loaded, checked and built beside tools, with every problem at its
file:line:col (gateway.definitions.prompts_resources, gateway.catalog.prompts, gateway.catalog.resources, gateway.catalog.prompts_resources)."""

from __future__ import annotations

import asyncio
import os

import pytest
from support import catalog_for

from gateway.catalog.build import build_catalog
from gateway.catalog.prompts import PromptArgumentsInvalid
from gateway.context import CallContext
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.settings import Settings

GOOD = """
    prompts:
      - id: greet
        name: Greeting
        description: Greets someone
        arguments:
          - {name: who, description: Who to greet, required: true, completions: [paris, park, Party, rome]}
          - {name: mood}
        messages:
          - {role: user, text: "Hello {{ args.who }}{% if args.mood is defined %}, you look {{ args.mood }}{% endif %}"}
          - {role: assistant, image: {file: images/p.png, mime_type: image/png}}
          - {role: user, resource: {uri: "test://note"}}
          - {role: user, resource: {uri: "{{ args.who }}://x", text: "about {{ args.who }}"}}
    resources:
      - {uri: "test://note", name: note, file: note.txt, subscribe: true}
      - {uri: "test://bin", name: bin, file: images/p.png, mime_type: image/png}
      - {uri: "test://inline", name: inline, text: "{not a template}", description: Inline}
      - uri: "test://template/{id}/data"
        name: tmpl
        mime_type: application/json
        text: '{"id": "{{ args.id }}"}'
        completions: {id: ["123", "124", "200"]}
"""
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\xff"


@pytest.fixture
def good(write_definitions):
    root = write_definitions({"a.yaml": GOOD, "note.txt": "hello file\n"})
    (root / "images").mkdir()
    (root / "images" / "p.png").write_bytes(PNG)
    return root


def problems_of(root) -> list[str]:
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(root), Settings(definitions=root))
    return [str(problem) for problem in caught.value.problems]


def test_declared_prompts_render_their_arguments_as_data(good):
    prompt = catalog_for(good).content.prompts["greet"]
    assert prompt.entry() == {"name": "greet", "title": "Greeting", "description": "Greets someone", "arguments": [
        {"name": "who", "description": "Who to greet", "required": True}, {"name": "mood"}]}
    got = prompt.get({"who": "{{ 7*7 }}"})  # an argument is data: never rendered as a template
    assert [m["content"] for m in got["messages"]] == [
        {"type": "text", "text": "Hello {{ 7*7 }}"},
        {"type": "image", "data": "iVBORw0KGgoAAP8=", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://note", "mimeType": "text/plain", "text": "hello file\n"}},
        {"type": "resource", "resource": {"uri": "{{ 7*7 }}://x", "mimeType": "text/plain",
                                          "text": "about {{ 7*7 }}"}},
    ]
    assert got["messages"][1]["role"] == "assistant"
    assert prompt.get({"who": "a", "mood": "happy"})["messages"][0]["content"]["text"] == "Hello a, you look happy"
    assert prompt.complete("who", "PA") == ["paris", "park", "Party"]
    assert prompt.complete("mood", "") == [] and prompt.complete("nobody", "") == []


def test_missing_required_and_unknown_prompt_arguments_are_named(good):
    prompt = catalog_for(good).content.prompts["greet"]
    with pytest.raises(PromptArgumentsInvalid, match="prompt 'greet' needs argument 'who'"):
        prompt.get({"mood": "x"})
    with pytest.raises(PromptArgumentsInvalid, match="has no argument 'whom' \\(arguments: who, mood\\)"):
        prompt.get({"who": "x", "whom": "y"})


def test_resources_read_text_files_blobs_and_templates(good):
    content = catalog_for(good).content

    def read(uri):
        resource, variables = content.resource_for(uri)
        return asyncio.run(resource.read(uri, variables, CallContext()))

    assert read("test://note") == [{"uri": "test://note", "mimeType": "text/plain", "text": "hello file\n"}]
    assert read("test://bin") == [{"uri": "test://bin", "mimeType": "image/png", "blob": "iVBORw0KGgoAAP8="}]
    assert read("test://inline")[0]["text"] == "{not a template}"
    assert read("test://template/a%2Fb/data") == [
        {"uri": "test://template/a%2Fb/data", "mimeType": "application/json", "text": '{"id": "a/b"}'}]
    assert content.resource_for("test://template/a/b/data") is None and content.resource_for("test://nope") is None
    assert content.resources["test://template/{id}/data"].entry() == {
        "uriTemplate": "test://template/{id}/data", "name": "tmpl", "mimeType": "application/json"}
    assert content.resources["test://template/{id}/data"].complete("id", "12") == ["123", "124"]


def test_a_changed_resource_file_is_a_new_catalog_version(good):
    before = catalog_for(good).version
    (good / "note.txt").write_text("changed\n")
    assert catalog_for(good).version != before


def test_every_mistake_is_a_problem_at_its_node(write_definitions, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    root = write_definitions({"bad.yaml": """
        prompts:
          - id: p1
            description: d
            arguments: [{name: a}, {name: a}]
            messages:
              - {role: user, text: "{{ args.b }}"}
              - {role: user, text: "{{ secrets.TOKEN }}"}
              - {role: user, text: "{% for %}"}
              - {role: user, image: {file: ../secret.txt, mime_type: image/png}}
              - {role: user, resource: {uri: "test://undeclared"}}
          - {id: p2, description: d, messages: [{role: user, text: x, image: {file: a, mime_type: image/png}}]}
        resources:
          - {uri: "test://link", name: l, file: link.txt}
          - {uri: "test://abs", name: a, file: /etc/passwd}
          - {uri: "test://{a}{b}", name: t, text: x}
          - {uri: "test://both", name: b, text: x, file: y}
          - {uri: "test://t/{id}", name: t, text: "{{ args.other }}", completions: {nope: [x]}}
          - {uri: "test://fifo", name: f, file: fifo}
    """, "dup.yaml": """
        prompts:
          - {id: p1, description: d, messages: [{role: user, text: x}]}
        resources:
          - {uri: "test://fifo", name: again, text: x}
    """})
    os.symlink(outside, root / "link.txt")
    os.mkfifo(root / "fifo")
    found = problems_of(root)
    expected = [
        "bad.yaml:4:35: argument 'a' is declared twice",
        "bad.yaml:6:28: template reads argument 'b', which is not declared (declared: a, a)",
        "bad.yaml:7:28: unknown name(s) 'secrets' in template (it may use: args)",
        "bad.yaml:8:28: template syntax error",
        "bad.yaml:9:36: '../secret.txt': give a path below the definitions directory, without '..'",
        "bad.yaml:10:38: 'test://undeclared' is not a resource declared with text or a file",
        "bad.yaml:11:41: prompts[1].messages[0]: give a role and one of text, image or resource",
        "bad.yaml:13:41: 'link.txt' leads outside the definitions directory",
        "bad.yaml:14:40: '/etc/passwd': give a path below the definitions directory",
        "bad.yaml:15:11: invalid resource template: {a} must be followed by the end or a reserved character",
        "bad.yaml:16:5: resources[3]: give exactly one of text, file or binding",
        "bad.yaml:17:43: template reads argument 'other', which is not declared (declared: id)",
        "bad.yaml:18:41: 'fifo' is not a regular file",
        "dup.yaml:2:10: duplicate prompt id 'p1' (first declared at bad.yaml:2:5)",
        "dup.yaml:4:11: duplicate resource uri 'test://fifo' (first declared at bad.yaml:18:5)",
    ]
    for fragment in expected:
        assert any(problem.startswith(fragment) for problem in found), (fragment, found)
    assert "bad.yaml:17:77: 'nope' is not a variable of the uri (variables: id)" in found


def test_an_http_resource_is_checked_as_an_http_tool_is(write_definitions):
    """Its binding is the http binding, built as a tool's: a template reading what is not a uri variable is a
    problem at its node."""
    root = write_definitions({"h.yaml": """
        resources:
          - uri: "h://{id}"
            name: h
            binding: {http: {url: "https://example.com/{{ args.id }}/{{ args.nope }}"}}
    """})
    assert problems_of(root) == [("h.yaml:4:27: template reads argument 'nope', which is not in "
                                  "input_schema.properties (declared: id)")]
