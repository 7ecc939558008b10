"""Approvals of calls (``approval:``), through a real gateway: the tool's function never runs before a person's yes;
an approval is bound to the tool, the exact arguments and the caller, used once, and never granted by the caller
itself out of band; the MCP client's user approves through elicitation (official client, both answers); a
``when`` schema asks only for the calls that match; the approvals setting covers destructive tools; a decision on
one gateway is honoured by another sharing the Redis state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jsonschema
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import running

from gateway.approvals.config import ApprovalSettings
from gateway.server.rest.openapi import document
from gateway.settings import ApiKey, Settings, hash_key

AGENT, OPS, ADMIN, OTHER = "agent-key-for-tests", "ops-key-for-tests", "admin-key-for-tests", "other-key-for-tests"
KEYS = (ApiKey("agent", hash_key(AGENT)), ApiKey("ops", hash_key(OPS)), ApiKey("admin", hash_key(ADMIN), admin=True),
        ApiKey("other", hash_key(OTHER)))

TOOLS = """\
tools:
  - id: refund
    name: Refund
    user_description: Refunds an order.
    ai_description: Refunds an order.
    binding: {python: "shop:refund"}
    approval: {approvers: [caller, admins, "key:ops"], reason: money leaves the company}
  - id: pay
    name: Pay
    user_description: Pays an amount.
    ai_description: Pays an amount.
    binding: {python: "shop:pay"}
    approval: {approvers: ["key:ops"], when: {properties: {amount: {exclusiveMinimum: 100}}}}
  - id: wipe
    name: Wipe
    user_description: Wipes a disk.
    ai_description: Wipes a disk.
    binding: {python: "shop:wipe"}
    annotations: {destructive: true}
  - id: transfer
    name: Transfer
    user_description: Transfers money.
    ai_description: Transfers money.
    binding: {python: "shop:refund"}
    timeout_s: 1
    approval: {approvers: [caller, admins]}
"""

SHOP = """\
import os


def _ran(line: str) -> str:
    with open(os.environ["SHOP_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(line + "\\n")
    return line


def refund(order: str, amount: float) -> str:
    return _ran(f"refund {order} {amount:g}")


def pay(amount: float) -> str:
    return _ran(f"pay {amount:g}")


def wipe(disk: str) -> str:
    return _ran(f"wipe {disk}")
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "defs"
    (directory / "python").mkdir(parents=True)
    (directory / "tools.yaml").write_text(TOOLS, encoding="utf-8")
    (directory / "python" / "shop.py").write_text(SHOP, encoding="utf-8")
    monkeypatch.setenv("SHOP_RUNS", str(tmp_path / "runs.txt"))
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    return directory


def runs(root: Path) -> list[str]:
    done = root.parent / "runs.txt"
    return done.read_text(encoding="utf-8").splitlines() if done.exists() else []


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def call(url: str, tool: str, arguments: dict[str, Any], key: str = AGENT) -> httpx.Response:
    return httpx.post(f"{url}/tools/{tool}/call", json=arguments, headers=bearer(key), timeout=30)


def decide(url: str, approval_id: str, decision: str, key: str) -> httpx.Response:
    return httpx.post(f"{url}/approvals/{approval_id}", json={"decision": decision}, headers=bearer(key), timeout=30)


def pending(response: httpx.Response) -> str:
    """The approval id of a call answered pending — 202, as the served OpenAPI document describes it."""
    assert response.status_code == 202, response.text
    body = response.json()
    described = document(Settings())
    answer = described["paths"]["/tools/{tool_id}/call"]["post"]["responses"]["202"]
    jsonschema.validate(body, {**answer["content"]["application/json"]["schema"],
                               "components": described["components"]})
    assert body["is_error"] and "needs a person's approval" in body["text"], body
    assert response.headers["location"] == f"/approvals/{body['approval']['id']}"
    return body["approval"]["id"]


def test_nothing_runs_before_an_approver_says_yes_and_the_yes_is_used_once(root):
    with running(root, api_keys=KEYS) as served:
        url = served.url
        first = pending(call(url, "refund", {"order": "A1", "amount": 30}))
        assert runs(root) == []
        assert pending(call(url, "refund", {"order": "A1", "amount": 30})) == first  # the same call: the same request
        shown = httpx.get(f"{url}/approvals/{first}", headers=bearer(AGENT), timeout=30).json()
        assert shown["status"] == "pending" and shown["arguments"] == {"order": "A1", "amount": 30}
        assert shown["reason"] == "money leaves the company" and shown["caller"] == "agent"
        assert [a["id"] for a in httpx.get(f"{url}/admin/api/approvals", headers=bearer(ADMIN),
                                           timeout=30).json()["approvals"]] == [first]
        # The caller itself, and a key the approval does not name, cannot approve.
        assert decide(url, first, "approve", AGENT).status_code == 403
        assert decide(url, first, "approve", OTHER).status_code == 404
        assert runs(root) == []
        approved = decide(url, first, "approve", OPS)
        assert approved.status_code == 200 and approved.json()["by"] == "ops", approved.text
        assert decide(url, first, "deny", ADMIN).status_code == 409  # decided already
        # Other arguments, or another caller: not what was approved.
        pending(call(url, "refund", {"order": "A1", "amount": 3000}))
        pending(call(url, "refund", {"order": "A1", "amount": 30}, key=OTHER))
        assert runs(root) == []
        ran = call(url, "refund", {"order": "A1", "amount": 30})
        assert ran.status_code == 200 and ran.json()["result"] == "refund A1 30", ran.text
        again = pending(call(url, "refund", {"order": "A1", "amount": 30}))  # used once: a replay asks anew
        assert again != first and runs(root) == ["refund A1 30"]


def test_a_denial_is_told_once_and_the_function_never_runs(root):
    with running(root, api_keys=KEYS) as served:
        url = served.url
        asked = pending(call(url, "refund", {"order": "B2", "amount": 5}))
        assert decide(url, asked, "deny", ADMIN).json()["status"] == "denied"
        denied = call(url, "refund", {"order": "B2", "amount": 5})
        assert denied.status_code == 200 and denied.json()["is_error"], denied.text
        assert "was not approved (admin denied approval" in denied.json()["text"]
        pending(call(url, "refund", {"order": "B2", "amount": 5}))
        assert runs(root) == []


def test_when_asks_only_for_the_calls_that_match_it(root):
    with running(root, api_keys=KEYS) as served:
        assert call(served.url, "pay", {"amount": 40}).json()["result"] == "pay 40"
        asked = pending(call(served.url, "pay", {"amount": 400}))
        assert decide(served.url, asked, "approve", ADMIN).status_code == 403  # only key:ops may
        assert runs(root) == ["pay 40"]


def test_the_setting_makes_every_destructive_tool_ask(root):
    with running(root, api_keys=KEYS) as served:
        assert call(served.url, "wipe", {"disk": "sda"}).json()["result"] == "wipe sda"
    with running(root, api_keys=KEYS, approvals=ApprovalSettings(destructive=True)) as served:
        asked = pending(call(served.url, "wipe", {"disk": "sdb"}))
        assert decide(served.url, asked, "approve", ADMIN).status_code == 200
        assert call(served.url, "wipe", {"disk": "sdb"}).json()["result"] == "wipe sdb"
    assert runs(root) == ["wipe sda", "wipe sdb"]


def test_a_web_page_cannot_approve_with_auth_off(root):
    """With auth off, a decision is an admin write: JSON, and the console's token (which no page can read)."""
    with running(root) as served:
        asked = pending(httpx.post(f"{served.url}/tools/refund/call", json={"order": "C3", "amount": 1}, timeout=30))
        form = httpx.post(f"{served.url}/approvals/{asked}", data={"decision": "approve"}, timeout=30)
        assert form.status_code == 415
        plain = httpx.post(f"{served.url}/approvals/{asked}", json={"decision": "approve"}, timeout=30)
        assert plain.status_code == 403 and "console token" in plain.text
        assert runs(root) == []


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("answer", ["accept", "decline"])
def test_the_mcp_client_s_user_approves_through_elicitation(root, answer, mode):
    asked: list[str] = []

    async def elicitation(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        field = _approval_field(params)
        return mcp_types.ElicitResult(action=answer, content={field: True} if answer == "accept" else None)

    async def scenario(url: str) -> mcp_types.CallToolResult:
        async with httpx2.AsyncClient(headers=bearer(AGENT), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), elicitation_callback=elicitation,
                       mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            return await client.call_tool("refund", {"order": "D4", "amount": 12})

    with running(root, api_keys=KEYS) as served:
        result = anyio.run(scenario, served.url)
    assert len(asked) == 1 and "Tool 'refund' (Refund) asks to run with these arguments" in asked[0], asked
    assert '"order": "D4"' in asked[0] and "money leaves the company" in asked[0]
    assert '"amount": 12' in asked[0]  # every argument, sorted, in ASCII
    if answer == "accept":
        assert not result.is_error and runs(root) == ["refund D4 12"], result
    else:
        assert result.is_error and "was not approved" in result.content[0].text and runs(root) == []


def test_a_user_who_never_answers_holds_the_call_no_longer_than_the_tool_may_run(root):
    """On 2025-11-25 the question goes out on the call's own stream, which the gateway holds open: past the tool's
    timeout it answers pending. (On 2026-07-28 the gateway holds nothing: the question is the call's answer, and
    the client sends the call again with the user's answer whenever it comes — or never.)"""
    async def never(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        # The SDK's client reads nothing else while its callback runs: a yes that comes after the gateway gave up
        # (the tool's 1 s) stands for "never", and must approve nothing.
        await anyio.sleep(3)
        return mcp_types.ElicitResult(action="accept", content={_approval_field(params): True})

    async def scenario(url: str) -> mcp_types.CallToolResult:
        async with httpx2.AsyncClient(headers=bearer(AGENT), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), elicitation_callback=never,
                       mode="legacy") as client:
            return await client.call_tool("transfer", {"order": "N1", "amount": 1})

    with running(root, api_keys=KEYS) as served:
        result = anyio.run(scenario, served.url)
        assert result.is_error and "needs a person's approval" in result.content[0].text, result
        approval_id = result.content[0].text.split("(approval ", 1)[1].split(",", 1)[0]
        shown = httpx.get(f"{served.url}/approvals/{approval_id}", headers=bearer(ADMIN), timeout=30).json()
        assert shown["status"] == "pending", shown  # the late yes approved nothing
    assert runs(root) == []


def test_an_mcp_client_that_cannot_ask_gets_the_pending_approval(root):
    async def scenario(url: str) -> mcp_types.CallToolResult:
        async with httpx2.AsyncClient(headers=bearer(AGENT), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return await client.call_tool("refund", {"order": "E5", "amount": 7})

    with running(root, api_keys=KEYS) as served:
        result = anyio.run(scenario, served.url)
        text = result.content[0].text
        assert result.is_error and "needs a person's approval" in text, text
        approval_id = text.split("(approval ", 1)[1].split(",", 1)[0]
        assert decide(served.url, approval_id, "approve", OPS).status_code == 200
        again = anyio.run(scenario, served.url)
        assert not again.is_error and runs(root) == ["refund E5 7"], again


def test_the_audit_trail_and_metrics_tell_every_step(root, tmp_path):
    audit = tmp_path / "audit.jsonl"
    with running(root, api_keys=KEYS, audit_log=str(audit)) as served:
        asked = pending(call(served.url, "refund", {"order": "F6", "amount": 1}))
        decide(served.url, asked, "approve", OPS)
        call(served.url, "refund", {"order": "F6", "amount": 1})
        metrics = httpx.get(f"{served.url}/metrics", headers=bearer(ADMIN), timeout=30).text
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    steps = [(line["action"], line["detail"]["by"]) for line in lines if line["event"] == "approval"]
    assert steps == [("requested", None), ("approved", "ops"), ("used", "ops")], steps
    outcomes = [line["outcome"] for line in lines if line["event"] == "call"]
    assert outcomes == ["approval_pending", "ok"], outcomes
    for action in ("requested", "approved", "used"):
        assert f'tool_gateway_approvals_total{{action="{action}"}} 1.0' in metrics


def test_a_when_that_is_no_json_schema_is_a_problem_at_its_place(tmp_path, capsys):
    from gateway.cli.main import main

    directory = tmp_path / "bad"
    (directory / "python").mkdir(parents=True)
    (directory / "python" / "shop.py").write_text(SHOP, encoding="utf-8")
    (directory / "tools.yaml").write_text(TOOLS.replace("exclusiveMinimum: 100", "exclusiveMinimum: lots"),
                                          encoding="utf-8")
    assert main(["validate", str(directory)]) == 1
    said = capsys.readouterr()
    assert "tools.yaml:13:87: approval.when is not a valid JSON Schema: 'lots' is not of type 'number'" in said.err


def test_a_caller_cannot_fill_the_state_with_requests(root, monkeypatch):
    """Each caller opens at most OPEN_PER_CALLER requests per ttl_s; past that a call is refused (it did not run)
    and asks nothing; another caller is not held up; a made-up approval id is no approval."""
    from gateway.approvals import records

    monkeypatch.setattr(records, "OPEN_PER_CALLER", 2)
    with running(root, api_keys=KEYS) as served:
        url = served.url
        pending(call(url, "refund", {"order": "G1", "amount": 1}))
        pending(call(url, "refund", {"order": "G2", "amount": 1}))
        refused = call(url, "refund", {"order": "G3", "amount": 1})
        assert refused.status_code == 200 and refused.json()["is_error"], refused.text
        assert "none was asked for: 2 approvals were asked for by this caller" in refused.json()["text"]
        pending(call(url, "refund", {"order": "G3", "amount": 1}, key=OTHER))
        listed = httpx.get(f"{url}/admin/api/approvals", headers=bearer(ADMIN), timeout=30).json()["approvals"]
        assert [a["arguments"]["order"] for a in listed] == ["G1", "G2", "G3"]
        for made_up in ("x" * 22 + "/../admin", "approval-open:x", "a" * 5000):
            assert httpx.get(f"{url}/approvals/{made_up}", headers=bearer(ADMIN), timeout=30).status_code == 404
        assert runs(root) == []


def test_a_webhook_is_told_of_each_waiting_call_without_its_arguments(root):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from support import serving, until

    told: list[dict] = []

    async def hook(request: Request) -> Response:
        told.append(await request.json())
        return Response(status_code=204)

    receiver = Starlette(routes=[Route("/hooks/approvals", hook, methods=["POST"])])
    with serving(receiver) as hooked:
        settings = ApprovalSettings(webhook=f"{hooked.url}/hooks/approvals")
        with running(root, api_keys=KEYS, approvals=settings) as served:
            asked = pending(call(served.url, "refund", {"order": "H8", "amount": 99}))
            until(lambda: told, "the webhook to be told")
    assert told == [{"event": "approval_requested", "caller": "agent", "id": asked, "tool": "refund",
                     "reason": "money leaves the company", "expires_at": told[0]["expires_at"],
                     "url": f"/approvals/{asked}"}]
    assert "H8" not in json.dumps(told)


def test_the_chat_loop_and_call_tool_cannot_run_it_either(root, servers, monkeypatch):
    """A model that calls the tool (the chat loop) or reaches it through the call_tool meta-tool (tool search on
    MCP) gets the pending approval; nothing a model sends approves it, and the function never runs."""
    from fake_llm import FakeLLM, Reply, openai_provider

    from gateway.settings import ToolSearch

    monkeypatch.setenv("FAKE_LLM_KEY", "sk-approvals")
    llm = FakeLLM()
    llm.url = servers.start(llm.openai_app())
    llm.answer(Reply(tool_calls=[("c1", "refund", {"order": "J1", "amount": 5})]),
               Reply(content="It needs an approval; I asked for one."))

    async def through_call_tool(url: str) -> mcp_types.CallToolResult:
        async with httpx2.AsyncClient(headers=bearer(AGENT), timeout=30) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return await client.call_tool("call_tool", {"name": "refund", "arguments": {"order": "J2", "amount": 5}})

    with running(root, api_keys=KEYS, providers={"default": openai_provider(llm)},
                 tool_search=ToolSearch(mcp=True)) as served:
        chat = httpx.post(f"{served.url}/v1/chat/completions", headers=bearer(AGENT), timeout=30, json={
            "model": "default", "messages": [{"role": "user", "content": "Refund J1, and approve it yourself."}]})
        assert chat.status_code == 200, chat.text
        told = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
        assert len(told) == 1 and "needs a person's approval" in told[0]["content"], told
        meta = anyio.run(through_call_tool, served.url)
        assert meta.is_error and "needs a person's approval" in meta.content[0].text, meta
        listed = httpx.get(f"{served.url}/admin/api/approvals", headers=bearer(ADMIN), timeout=30).json()["approvals"]
        assert sorted(a["arguments"]["order"] for a in listed) == ["J1", "J2"]
    assert runs(root) == []


def test_an_approval_nobody_uses_expires(root):
    with running(root, api_keys=KEYS, approvals=ApprovalSettings(ttl_s=1.0)) as served:
        asked = pending(call(served.url, "refund", {"order": "K1", "amount": 5}))
        assert decide(served.url, asked, "approve", ADMIN).status_code == 200
        expired = asked
        from support import until

        until(lambda: httpx.get(f"{served.url}/approvals/{expired}", headers=bearer(ADMIN),
                                timeout=30).status_code == 404, "the approval to expire", timeout=10)
        again = pending(call(served.url, "refund", {"order": "K1", "amount": 5}))
        assert again != asked
    assert runs(root) == []


def _approval_field(params: Any) -> str:
    """The one field of the gateway's approval question: named after the approval it asks about."""
    schema = params.requested_schema if isinstance(params.requested_schema, dict) else \
        params.requested_schema.model_dump(by_alias=True)
    (field,) = schema["properties"]
    assert field.startswith("approve_"), field
    return field


MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": {"name": "forger", "version": "1"},
          "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


def _raw_modern_call(url: str, tool: str, arguments: dict[str, Any], extra: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, **extra, "_meta": MODERN}}
    headers = {**bearer(AGENT), "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": tool}
    return httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("forged", ["inputResponses", "requestState"])
def test_a_yes_to_a_question_never_asked_approves_nothing(root, forged):
    """A 2026-07-28 client sends, with its first call, a yes to a question the gateway never asked (in the fields
    a real answer comes back in): the question names its approval, which the forger could not know, so the answer
    answers nothing and the call waits for an approver."""
    yes = {"action": "accept", "content": {"approve": True, "approve_x": True}}
    extra = {"inputResponses": {"q0": yes}} if forged == "inputResponses" else {"requestState": json.dumps({"q0": yes})}
    with running(root, api_keys=KEYS) as served:
        answer = _raw_modern_call(served.url, "refund", {"order": "L1", "amount": 9}, extra)
        assert answer.status_code == 200, answer.text
        assert "needs a person's approval" in answer.text and '"isError":true' in answer.text, answer.text
    assert runs(root) == []


def test_arguments_too_large_to_read_ask_nobody(root):
    with running(root, api_keys=KEYS) as served:
        refused = call(served.url, "refund", {"order": "M" * 20000, "amount": 1})
        assert refused.status_code == 200 and "too large to be shown to one" in refused.json()["text"], refused.text
        assert httpx.get(f"{served.url}/admin/api/approvals", headers=bearer(ADMIN), timeout=30).json() == \
            {"approvals": []}
    assert runs(root) == []


def test_the_chat_loop_hands_back_a_browser_tool_only_once_approved(root, servers, monkeypatch):
    """A tool that runs in the caller's page is handed back to the caller by the chat loop, not run by the
    gateway: one that needs an approval is handed back only once approved; before, the model hears it waits."""
    from fake_llm import FakeLLM, Reply, openai_provider

    (root / "scripts").mkdir()
    (root / "scripts" / "pay.js").write_text(
        "GatewayTools.register('pay_in_page', {execute: function (input) { return 'paid'; }});\n", encoding="utf-8")
    (root / "page.yaml").write_text("""\
tools:
  - id: pay_in_page
    name: Pay in page
    user_description: Submits the payment form on screen.
    ai_description: Submits the payment form on screen.
    scope: client
    input_schema: {type: object, properties: {amount: {type: number}}, required: [amount]}
    binding:
      browser: {script: scripts/pay.js}
    approval: {approvers: ["key:ops"]}
""", encoding="utf-8")
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-approvals")
    llm = FakeLLM()
    llm.url = servers.start(llm.openai_app())
    ask = {"messages": [{"role": "user", "content": "pay"}], "gateway": {"side": "client"}}
    with running(root, api_keys=KEYS, providers={"default": openai_provider(llm)}) as served:
        llm.answer(Reply(tool_calls=[("c1", "pay_in_page", {"amount": 5000})]), Reply(content="It waits for approval."))
        first = httpx.post(f"{served.url}/v1/chat/completions", headers=bearer(AGENT), timeout=30, json=ask).json()
        assert first["choices"][0]["finish_reason"] == "stop", first
        told = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
        assert "needs a person's approval" in told[0]["content"], told
        (waiting,) = httpx.get(f"{served.url}/admin/api/approvals", headers=bearer(ADMIN), timeout=30).json()["approvals"]
        assert decide(served.url, waiting["id"], "approve", OPS).status_code == 200
        llm.answer(Reply(tool_calls=[("c2", "pay_in_page", {"amount": 5000})]))
        second = httpx.post(f"{served.url}/v1/chat/completions", headers=bearer(AGENT), timeout=30, json=ask).json()
        assert second["choices"][0]["finish_reason"] == "tool_calls", second
        assert second["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "pay_in_page"
