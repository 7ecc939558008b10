"""Settings: defaults, a YAML file, the environment; API keys kept only as hashes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.settings import SettingsInvalid, hash_key, load_settings


def test_file_then_environment_then_overrides(tmp_path):
    """The environment overrides the file, and explicit overrides (CLI flags) override both."""
    path = tmp_path / "gateway.yaml"
    path.write_text("port: 9000\ndefinitions: defs\nallowed_packages: [acme.tools]\n")
    settings = load_settings(path, {"TOOL_GATEWAY_PORT": "9100"}, host="0.0.0.0")
    assert (settings.port, settings.host) == (9100, "0.0.0.0")
    assert settings.definitions == tmp_path / "defs"
    assert settings.allowed_packages == ("acme.tools",)


def test_api_keys_from_the_environment_are_hashed():
    """A key given in clear in the environment is stored only as its SHA-256 and still found."""
    settings = load_settings(None, {"TOOL_GATEWAY_API_KEY": "s3cret", "TOOL_GATEWAY_ADMIN_KEY": "adm1n"})
    assert "s3cret" not in repr(settings) and "adm1n" not in repr(settings)
    assert settings.find_key("s3cret").name == "env"
    assert settings.find_key("adm1n").admin
    assert settings.find_key("wrong") is None


def test_api_keys_from_the_file_carry_toolsets(tmp_path):
    """A settings-file key names its hash, its toolsets and whether it is an admin key."""
    path = tmp_path / "gateway.yaml"
    path.write_text(f"api_keys:\n  - {{name: app, sha256: {hash_key('k')}, toolsets: [math]}}\n")
    key = load_settings(path, {}).find_key("k")
    assert key.allows(("math",)) and not key.allows(("home",)) and not key.admin


@pytest.mark.parametrize("text, message", [
    ("port: many\n", "setting 'port': invalid value 'many'"),
    ("api_keys: [{name: x}]\n", "needs 'name' and 'sha256'"),
    ("- a\n", "expected a mapping of settings"),
    ("log_level: verbose\n", "setting 'log_level': invalid value 'verbose' .*debug, info, warning, error, critical"),
    ("allowed_packages: acme\n", "setting 'allowed_packages': expected a list, got the string 'acme'"),
    ("allowed_origins: https://app.example\n", "setting 'allowed_origins': expected a list"),
    ("api_keys: [{name: x, sha256: ab, toolsets: math}]\n", "api key 'x': 'toolsets': expected a list, got the string 'math'"),
    ("api_keys: [{name: x, sha256: ab, may_assert_user: maybe}]\n", "api key 'x': 'may_assert_user' must be"),
])
def test_invalid_settings_say_what_is_wrong(tmp_path, text, message):
    """Invalid settings raise SettingsInvalid naming the setting and the problem."""
    path = Path(tmp_path / "gateway.yaml")
    path.write_text(text)
    with pytest.raises(SettingsInvalid, match=message):
        load_settings(path, {})


def test_log_level_from_the_environment_is_checked_and_normalised():
    """TOOL_GATEWAY_LOG_LEVEL is case-insensitive, and a level logging does not know is a SettingsInvalid, not
    a traceback at start-up."""
    assert load_settings(None, {"TOOL_GATEWAY_LOG_LEVEL": "DEBUG"}).log_level == "debug"
    with pytest.raises(SettingsInvalid, match="log_level"):
        load_settings(None, {"TOOL_GATEWAY_LOG_LEVEL": "verbose"})


def test_a_key_may_be_allowed_to_assert_the_user(tmp_path):
    """``may_assert_user: true`` on a settings-file key is kept; keys default to not asserting users."""
    path = tmp_path / "gateway.yaml"
    path.write_text(f"api_keys:\n  - {{name: web, sha256: {hash_key('w')}, may_assert_user: true}}\n"
                    f"  - {{name: app, sha256: {hash_key('a')}}}\n")
    settings = load_settings(path, {})
    assert settings.find_key("w").may_assert_user and not settings.find_key("a").may_assert_user


@pytest.mark.parametrize(("value", "said"), [
    ("approvals: [destructive]", "setting 'approvals': expected a mapping like {destructive: true, ttl_s: 900, webhook: https://…}"),
    ("approvals: {destructive: yes please}", "setting 'approvals.destructive': must be true or false"),
    ("approvals: {ttl_s: 5}", "setting 'approvals.ttl_s': must be a number of seconds from 10 to 86400"),
    ("approvals: {webhook: 'ftp://x/y'}", "setting 'approvals.webhook': must be an http:// or https:// URL"),
    ("approvals: {hook: x}", "setting 'approvals': unknown key(s) hook (known: destructive, ttl_s, webhook)"),
])
def test_the_approvals_setting_is_checked(tmp_path, value, said):
    settings = tmp_path / "settings.yaml"
    settings.write_text(value + "\n", encoding="utf-8")
    with pytest.raises(SettingsInvalid, match=re.escape(said)):
        load_settings(settings, environ={})


def test_the_approvals_setting_is_read(tmp_path):
    settings = tmp_path / "settings.yaml"
    settings.write_text("approvals: {destructive: true, ttl_s: 120}\n", encoding="utf-8")
    approvals = load_settings(settings, environ={}).approvals
    assert (approvals.destructive, approvals.ttl_s) == (True, 120.0)
