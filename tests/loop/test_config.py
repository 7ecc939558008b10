"""Settings of the loop: ``providers`` and ``chat`` checked strictly, every problem named by its dotted path."""

from __future__ import annotations

import pytest

from gateway.loop import load_loop_config
from gateway.settings import Settings, SettingsInvalid, load_settings


def test_settings_file_with_providers_and_chat(tmp_path):
    """A settings file's providers and chat sections become typed settings with defaults filled in."""
    path = tmp_path / "gateway.yaml"
    path.write_text("""
providers:
  default:
    kind: openai
    model: gpt-4o-mini
    api_key: "{{ secrets.OPENAI_API_KEY }}"
  claude:
    kind: anthropic
    model: claude-sonnet-4-5
    timeout_s: 120
chat:
  max_round_trips: 4
  toolsets: [math]
""")
    config = load_loop_config(load_settings(path, {}))
    openai, claude = config.providers["default"], config.providers["claude"]
    assert (openai.base_url, openai.timeout_s, openai.max_retries) == ("https://api.openai.com/v1", 60.0, 2)
    assert openai.api_key.references.secrets == {"OPENAI_API_KEY"}
    assert "OPENAI_API_KEY" in repr(openai.api_key)  # the reference, never a value
    assert (claude.base_url, claude.timeout_s, claude.api_key) == ("https://api.anthropic.com", 120.0, None)
    assert config.chat.provider == "default"  # 'default' is chosen among several
    assert (config.chat.max_round_trips, config.chat.max_parallel_tools, config.chat.toolsets) == (4, 8, ("math",))
    assert config.chat.tools is None


def test_a_single_provider_is_the_default_whatever_its_name():
    """With one provider, chat.provider need not name it."""
    config = load_loop_config(Settings(providers={"local": {"kind": "openai", "model": "llama3.2",
                                                            "base_url": "http://localhost:11434/v1"}}))
    assert config.chat.provider == "local"


def test_no_providers_is_valid():
    """Without providers the loop is simply unavailable; the settings are not wrong."""
    config = load_loop_config(Settings())
    assert config.providers == {} and config.chat.provider is None


def test_every_problem_is_reported_with_its_path():
    """Wrong kinds, types, keys, templates and references are all reported at once, each with its path."""
    settings = Settings(
        providers={
            "a": {"kind": "opnai", "model": "m"},
            "b": {"kind": "openai", "base_url": "ftp://x", "timeout_s": 0, "max_retries": -1, "colour": "red",
                  "api_key": "{{ secrets.KEY }", "headers": {"x": 1}},
            "c": {"kind": "anthropic", "strict_tools": True},
        },
        chat={"provider": "zz", "max_round_trips": 0, "toolsets": "math", "extra": 1},
    )
    with pytest.raises(SettingsInvalid) as caught:
        load_loop_config(settings)
    message = str(caught.value)
    for expected in [
        "providers.a.kind: expected one of 'openai', 'anthropic', got 'opnai'",
        "providers.b: unknown key(s) colour",
        "providers.b.base_url: expected an http(s) URL, got 'ftp://x'",
        "providers.b.timeout_s: expected a number of at least 0.001, got 0",
        "providers.b.max_retries: expected an integer of at least 0, got -1",
        "providers.b.api_key: template syntax error",
        "providers.b.headers: expected a mapping of names to strings",
        "providers.c.model: required",
        "providers.c.strict_tools: expected true or false, and true only for kind openai",
        "chat: unknown key(s) extra",
        "chat.provider: no provider named 'zz'",
        "chat.max_round_trips: expected an integer of at least 1, got 0",
        "chat.toolsets: expected a list of names, got 'math'",
    ]:
        assert expected in message
    assert caught.value.exit_code == 2


def test_a_template_may_only_read_secrets():
    """A provider setting's template may name secrets, nothing else."""
    with pytest.raises(SettingsInvalid, match=r"providers.p.api_key: unknown name\(s\) 'args'"):
        load_loop_config(Settings(providers={"p": {"kind": "openai", "model": "m", "api_key": "{{ args.key }}"}}))


def test_provider_keys_obey_the_secrets_rule_of_definitions():
    """A provider's api_key or header may not name the gateway's own TOOL_GATEWAY_* variables, nor, when
    allowed_secrets is set, a variable outside it: each is a problem naming the setting's path."""
    provider = {"kind": "openai", "model": "m", "api_key": "{{ secrets.TOOL_GATEWAY_ADMIN_KEY }}",
                "headers": {"x-extra": "{{ secrets.FOO }}"}}
    with pytest.raises(SettingsInvalid) as caught:
        load_loop_config(Settings(providers={"p": provider}, allowed_secrets=("OPENAI_API_KEY",)))
    message = str(caught.value)
    assert "providers.p.api_key: secret 'TOOL_GATEWAY_ADMIN_KEY' may not be read" in message
    assert "providers.p.headers.x-extra: secret 'FOO' is not in the allowed_secrets setting" in message
