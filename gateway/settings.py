"""Server settings: defaults, overridden by a YAML settings file, overridden by the environment.

Settings file keys and environment variables (``TOOL_GATEWAY_<KEY>`` in upper case) share one spelling with the
dataclass fields below. Secrets (API keys, provider keys) are never stored in clear: API keys are kept as
SHA-256 hashes, provider keys as ``{{ secrets.NAME }}`` references resolved from the environment at call time.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from .approvals.config import SETTING_KEYS as APPROVAL_KEYS
from .approvals.config import ApprovalSettings
from .errors import GatewayError
from .identity import config as oauth_config
from .state import rate_limits

ENV_PREFIX = "TOOL_GATEWAY_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")  # what both logging and uvicorn accept
RETURN_SCHEMA_MODES = ("description", "result", "none")
LOG_FORMATS = ("text", "json")
TRACING_MODES = ("auto", "on", "off")
HTTP_PARSERS = ("auto", "httptools", "h11")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


class SettingsInvalid(GatewayError):
    exit_code = 2


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """An API key, by hash, with what it may use: ``toolsets`` (empty = every toolset) and admin operations.

    ``may_assert_user`` marks a trusted front end that calls on behalf of its own users: only such a key may name
    the user tools see (``X-User``, a chat body's ``user``); for any other key that user is the key's name.
    """

    name: str
    sha256: str
    toolsets: tuple[str, ...] = ()
    admin: bool = False
    may_assert_user: bool = False
    metrics: bool = False  # may scrape /metrics (admin keys may too); for a Prometheus server's credentials
    # ``{calls, per_s}``: the key's calls across every tool and replica (gateway.state.rate_limits); None: unlimited.
    rate_limit: Mapping[str, Any] | None = None
    # Whether its MCP tools/list is a search (ToolSearch); None: as the tool_search setting says.
    tool_search: bool | None = None

    def allows(self, tool_toolsets: tuple[str, ...]) -> bool:
        return not self.toolsets or bool(set(self.toolsets) & set(tool_toolsets))


@dataclass(frozen=True)
class ToolSearch:
    """The ``tool_search`` setting: when MCP clients get a search instead of the whole catalog.

    ``mcp``: a caller's ``tools/list`` is its pinned tools (``always``) and the meta-tools ``search_tools`` and
    ``call_tool`` (an API key's own ``tool_search`` decides for it); ``toolsets``: short of that, the tools of these
    toolsets are found by search rather than listed, the others listed beside the meta-tools (a large federated
    source behind search, the few everyday tools at hand); a caller who may use ``min_tools`` tools or fewer gets
    the whole list all the same; ``k``: what ``search_tools`` returns when its call does not say; ``dense``: every
    search (REST, MCP, the chat loop, the CLI) fuses BM25 with a dense model."""

    mcp: bool = False
    always: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()
    min_tools: int = 0
    k: int = 8
    dense: bool = False  # BM25 fused with a dense model (the search-dense extra; gateway.search.dense)

    def leaves_to_search(self, toolsets: tuple[str, ...]) -> bool:
        """Whether a tool of ``toolsets`` is left to search where search is on (every tool, unless ``toolsets`` names
        the toolsets that are)."""
        return not self.toolsets or bool(set(self.toolsets) & set(toolsets))


TOOL_SEARCH_KEYS = ("mcp", "always", "toolsets", "min_tools", "k", "dense")
MAX_SEARCH_K = 50  # gateway.search.MAX_K


@dataclass(frozen=True)
class Settings:
    definitions: Path = Path("tool-definitions")
    host: str = "127.0.0.1"
    port: int = 8000
    reload: bool = True
    reload_poll: bool = False
    # Python bindings may name functions in <definitions>/python/ and in these packages only.
    allowed_packages: tuple[str, ...] = ()
    # Plugins whose tools are served, by entry point name (group tool_gateway.plugins); ["*"]: every installed one.
    plugins: tuple[str, ...] = ()
    default_timeout_s: float = 30.0
    # Concurrent executions of one tool (in-flight work included: a timed-out sync call holds its slot until its
    # thread ends), so one slow or hung tool cannot take every worker from the others.
    max_concurrent_calls_per_tool: int = 16
    max_result_chars: int = 100_000
    max_body_bytes: int = 1_048_576
    max_concurrent_calls: int = 64
    # Origins browsers may use every surface from: exact once written; empty means loopback pages while auth is
    # off. The address the gateway serves at is always allowed (server/http/origins.py).
    allowed_origins: tuple[str, ...] = ()
    # Live browser-bridge sessions one client address may hold (behind a reverse proxy: all pages share one).
    bridge_sessions_per_client: int = 20
    # MCP 2025-11-25 sessions (gateway.server.mcp.sessions): how many one principal (an API key's name; later an
    # OAuth user) may hold open on one replica, and how long an unused session lives before it is closed.
    mcp_sessions_per_key: int = 100
    mcp_session_idle_s: float = 1800.0
    api_keys: tuple[ApiKey, ...] = ()
    # OAuth 2.1 access tokens from an identity provider, beside API keys (gateway.identity.config); None: keys only.
    # TOOL_GATEWAY_OAUTH_ISSUER and TOOL_GATEWAY_OAUTH_AUDIENCE set the two it needs.
    oauth: oauth_config.OAuthConfig | None = None
    # LLM providers and the chat loop's limits; interpreted by gateway.loop.
    providers: Mapping[str, Any] = field(default_factory=dict)
    chat: Mapping[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    # What an admin's files may cost (gateway.definitions.yamlsource, gateway.runtime.rebuild, gateway.bindings.python).
    max_file_bytes: int = 8_388_608  # a definitions file over this is a problem, not parsed
    max_yaml_nodes: int = 250_000  # nodes one definitions file may hold once its aliases are expanded
    reload_timeout_s: float = 60.0  # a rebuild running longer is abandoned and reported; the last catalog serves
    import_timeout_s: float = 10.0  # importing one python/ module (its top-level code) longer is a problem
    # What one `sources:` entry may bring (gateway.sources): past either, the source is refused, its status and a
    # warning naming the setting. Real upstreams list tens to a few hundred tools (GitHub's OpenAPI document, one
    # of the largest, has ~1,200 operations); 100,000 took the gateway minutes of CPU and a gigabyte of memory.
    source_max_tools: int = 2_000  # tools an MCP server lists, operations an OpenAPI document declares
    source_max_bytes: int = 16_777_216  # one tools/list answer of an MCP server (OpenAPI: max_file_bytes)
    # How deeply an MCP tool's input or output schema may nest (the schema itself is level 1): room for schemas of
    # arguments as deep as a call may send (64 levels, two schema levels each); 500 broke the SDK's serialiser.
    source_max_depth: int = 128
    # Environment variables ``{{ secrets.NAME }}`` may name; empty: any but the gateway's own (TOOL_GATEWAY_*).
    allowed_secrets: tuple[str, ...] = ()
    # The secret (an environment variable's name) whose value encrypts the upstream OAuth tokens the gateway keeps
    # under its state directory (gateway.upstream.oauth.store); empty: they are kept in memory, lost on a restart.
    upstream_oauth_key_secret: str = ""
    # The HTTP server (gateway.server.http.connections): its parser and event loop (auto: httptools and uvloop
    # where installed), and its connection limits.
    http_parser: str = "auto"
    event_loop: str = "auto"
    header_timeout_s: float = 10.0  # a connection that has not sent a complete request head by then is closed
    keepalive_timeout_s: float = 5.0  # an idle keep-alive connection is closed after this
    max_header_bytes: int = 65_536  # a request head larger than this is refused
    # Filters wrapped around every call (outermost): "module:function" or {use: "module:function", with: {...}};
    # resolved and checked when the catalog is built (gateway.filters.chains).
    filters: tuple[Any, ...] = ()
    # Filters for the tools of a toolset, between the settings' filters and the tool's: {toolset: [specs]}.
    toolset_filters: Mapping[str, Any] = field(default_factory=dict)
    # How an LLM learns a tool's return-value schema when the tool does not choose: description | result | none.
    return_schema: str = "none"
    # Observability (gateway.observe): log lines as text or JSON objects (one per line).
    log_format: str = "text"
    # The audit trail: "" off, "-" standard output, else a file (JSON Lines, rotated past audit_max_bytes,
    # audit_backups old files kept).
    audit_log: str = ""
    audit_max_bytes: int = 10_485_760
    audit_backups: int = 5
    # Per-tool p50/p95/error rate (and each tool's slo) are judged over the calls of this many seconds.
    slo_window_s: float = 300.0
    # OpenTelemetry traces (the [otel] extra, configured by OTEL_* variables): auto = on when an OTEL_ exporter
    # or endpoint variable is set and the extra is installed.
    tracing: str = "auto"
    # Cluster mode (gateway.state, gateway.cluster): {redis_url, prefix, heartbeat_s}; empty: one process, state
    # in memory. TOOL_GATEWAY_CLUSTER_REDIS_URL sets redis_url.
    cluster: Mapping[str, Any] = field(default_factory=dict)
    # Tool search on MCP (gateway.server.mcp.searching): {mcp, always, min_tools, k}; off by default.
    tool_search: ToolSearch = field(default_factory=lambda: ToolSearch())
    approvals: ApprovalSettings = field(default_factory=lambda: ApprovalSettings())  # gateway.approvals

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys) or self.oauth is not None

    def find_key(self, presented: str) -> ApiKey | None:
        """The key whose digest matches, compared in constant time and without stopping at the first match."""
        digest = hash_key(presented)
        found = None
        for key in self.api_keys:
            if hmac.compare_digest(key.sha256, digest):
                found = key
        return found


_FIELDS = {f.name: f for f in fields(Settings)}


def load_settings(path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None,
                  **overrides: Any) -> Settings:
    """Defaults ← settings file ← environment ← explicit overrides (the CLI's flags)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = path or environ.get(ENV_PREFIX + "SETTINGS")
    if path:
        values.update(_read_file(Path(path)))
    values.update(_from_env(environ))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return _coerce(values)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise SettingsInvalid(f"{path}: cannot read settings file: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SettingsInvalid(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsInvalid(f"{path}: expected a mapping of settings")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise SettingsInvalid(f"{path}: unknown setting(s): {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    if "definitions" in data and not Path(data["definitions"]).is_absolute():
        data["definitions"] = path.parent / data["definitions"]
    return data


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in ("definitions", "host", "port", "reload", "reload_poll", "default_timeout_s", "max_result_chars",
                 "max_body_bytes", "max_concurrent_calls", "bridge_sessions_per_client", "log_level",
                 "mcp_sessions_per_key", "mcp_session_idle_s", "source_max_tools", "source_max_bytes", "source_max_depth",
                 "max_concurrent_calls_per_tool", "max_file_bytes", "max_yaml_nodes", "reload_timeout_s",
                 "import_timeout_s", "header_timeout_s", "keepalive_timeout_s", "max_header_bytes", "return_schema",
                 "http_parser", "event_loop", "log_format", "audit_log", "audit_max_bytes", "audit_backups",
                 "slo_window_s", "tracing"):
        if ENV_PREFIX + name.upper() in environ:
            values[name] = environ[ENV_PREFIX + name.upper()]
    for name in ("allowed_packages", "allowed_origins", "allowed_secrets", "plugins"):
        if ENV_PREFIX + name.upper() in environ:
            values[name] = [v.strip() for v in environ[ENV_PREFIX + name.upper()].split(",") if v.strip()]
    if environ.get(ENV_PREFIX + "OAUTH_ISSUER") or environ.get(ENV_PREFIX + "OAUTH_AUDIENCE"):
        values["env_oauth"] = {name: environ[ENV_PREFIX + "OAUTH_" + name.upper()] for name in ("issuer", "audience")
                               if environ.get(ENV_PREFIX + "OAUTH_" + name.upper())}
    if environ.get(ENV_PREFIX + "CLUSTER_REDIS_URL"):
        values["cluster_redis_url"] = environ[ENV_PREFIX + "CLUSTER_REDIS_URL"]
    # Keys given in clear through the environment are hashed at once and never kept.
    keys = []
    if environ.get(ENV_PREFIX + "API_KEY"):
        keys.append({"name": "env", "sha256": hash_key(environ[ENV_PREFIX + "API_KEY"])})
    if environ.get(ENV_PREFIX + "ADMIN_KEY"):
        keys.append({"name": "env-admin", "sha256": hash_key(environ[ENV_PREFIX + "ADMIN_KEY"]), "admin": True})
    if keys:
        values["env_api_keys"] = keys
    return values


def _coerce(values: dict[str, Any]) -> Settings:
    settings = Settings()
    changes: dict[str, Any] = {}
    keys = [*(values.pop("api_keys", None) or []), *values.pop("env_api_keys", [])]
    redis_url = values.pop("cluster_redis_url", None)
    if "env_oauth" in values:  # the environment's issuer / audience over the file's, its other keys kept
        values["oauth"] = {**(values.get("oauth") or {}), **values.pop("env_oauth")}
    if redis_url:
        values["cluster"] = {**_cluster(values.get("cluster")), "redis_url": redis_url}
    for name, value in values.items():
        default = getattr(settings, name)
        try:
            if isinstance(default, bool):
                changes[name] = value if isinstance(value, bool) else str(value).lower() in {"1", "true", "yes", "on"}
            elif isinstance(default, (int, float)):
                changes[name] = type(default)(value)
            elif isinstance(default, Path):
                changes[name] = Path(value)
            elif name == "filters":  # strings or mappings: their shape is checked where they are resolved
                changes[name] = _list(value, f"setting '{name}'")
            elif isinstance(default, tuple):
                changes[name] = _strings(value, f"setting '{name}'")
            else:
                changes[name] = value
        except (TypeError, ValueError):
            raise SettingsInvalid(f"setting '{name}': invalid value {value!r}") from None
    for name, allowed in (("return_schema", RETURN_SCHEMA_MODES), ("log_format", LOG_FORMATS),
                          ("tracing", TRACING_MODES), ("http_parser", HTTP_PARSERS), ("event_loop", EVENT_LOOPS)):
        if name in changes and changes[name] not in allowed:
            raise SettingsInvalid(f"setting '{name}': invalid value {changes[name]!r} "
                                  f"(use one of: {', '.join(allowed)})")
    for name in ("mcp_sessions_per_key", "mcp_session_idle_s", "source_max_tools", "source_max_bytes",
                 "source_max_depth"):
        if name in changes and not (0 < changes[name] < math.inf):
            raise SettingsInvalid(f"setting '{name}': must be a positive finite number, got {changes[name]!r}")
    if "log_level" in changes:
        level = str(changes["log_level"]).lower()
        if level not in LOG_LEVELS:
            raise SettingsInvalid(f"setting 'log_level': invalid value {changes['log_level']!r} "
                                  f"(use one of: {', '.join(LOG_LEVELS)})")
        changes["log_level"] = level
    if "cluster" in changes:
        changes["cluster"] = _cluster(changes["cluster"])
    for name, parse in (("oauth", oauth_config.parse), ("tool_search", _tool_search), ("approvals", _approvals)):
        if name in changes:
            try:
                changes[name] = parse(changes[name])
            except ValueError as exc:
                raise SettingsInvalid(str(exc)) from None
    changes["api_keys"] = tuple(_api_key(entry) for entry in keys)
    return replace(settings, **changes)


def _known_mapping(value: Any, name: str, example: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    """``value`` if it is a mapping of ``known`` keys; ``ValueError`` naming the setting otherwise."""
    if not isinstance(value, Mapping):
        raise ValueError(  # noqa: TRY004 — the settings' own error, raised as SettingsInvalid
            f"setting '{name}': expected a mapping like {example}")
    unknown = sorted(set(map(str, value)) - set(known))
    if unknown:
        raise ValueError(f"setting '{name}': unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    return value


def _approvals(value: Any) -> ApprovalSettings:
    value = _known_mapping(value, "approvals", "{destructive: true, ttl_s: 900, webhook: https://…}", APPROVAL_KEYS)
    destructive, ttl_s = value.get("destructive", False), value.get("ttl_s", ApprovalSettings.ttl_s)
    if not isinstance(destructive, bool):
        raise ValueError(f"setting 'approvals.destructive': must be true or false, got {destructive!r}")  # noqa: TRY004
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not 10 <= ttl_s <= 86400:
        raise ValueError(f"setting 'approvals.ttl_s': must be a number of seconds from 10 to 86400, got {ttl_s!r}")
    webhook = value.get("webhook", "")
    if not isinstance(webhook, str) or (webhook and urlsplit(webhook).scheme not in ("http", "https")) or \
            (webhook and not urlsplit(webhook).hostname):
        raise ValueError("setting 'approvals.webhook': must be an http:// or https:// URL")
    return ApprovalSettings(destructive, float(ttl_s), webhook)


def _tool_search(value: Any) -> ToolSearch:
    value = _known_mapping(value, "tool_search", "{mcp: true, always: [tool_id], k: 8}", TOOL_SEARCH_KEYS)
    mcp, always, toolsets = value.get("mcp", False), value.get("always", []), value.get("toolsets", [])
    min_tools, k = value.get("min_tools", 0), value.get("k", ToolSearch.k)
    if not isinstance(mcp, bool):
        raise ValueError(f"setting 'tool_search.mcp': must be true or false, got {mcp!r}")  # noqa: TRY004
    if not isinstance(always, list) or not all(isinstance(item, str) for item in always):
        raise ValueError("setting 'tool_search.always': expected a list of tool ids")
    if not isinstance(toolsets, list) or not all(isinstance(item, str) for item in toolsets):
        raise ValueError("setting 'tool_search.toolsets': expected a list of toolset names")
    if mcp and toolsets:
        raise ValueError("setting 'tool_search': 'mcp: true' leaves every tool to search, 'toolsets' only those "
                         "toolsets' tools: give one of them")
    if isinstance(min_tools, bool) or not isinstance(min_tools, int) or min_tools < 0:
        raise ValueError(f"setting 'tool_search.min_tools': must be a whole number, 0 or more, got {min_tools!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEARCH_K:
        raise ValueError(f"setting 'tool_search.k': must be a whole number from 1 to {MAX_SEARCH_K}, got {k!r}")
    dense = value.get("dense", False)
    if not isinstance(dense, bool):
        raise ValueError(f"setting 'tool_search.dense': must be true or false, got {dense!r}")  # noqa: TRY004
    if dense and find_spec("wordllama") is None:  # found, not imported: the search imports it on first use
        raise ValueError("setting 'tool_search.dense': needs the search-dense extra "
                         "(pip install 'tool-gateway[search-dense]')")
    return ToolSearch(mcp, tuple(always), tuple(toolsets), min_tools, k, dense)


CLUSTER_KEYS = {"redis_url": str, "prefix": str, "heartbeat_s": (int, float)}


def _cluster(value: Any) -> dict[str, Any]:
    """The ``cluster`` mapping, checked: known keys of the right types; a redis:// (or rediss://, unix://) URL."""
    if value in (None, {}):
        return {}
    if not isinstance(value, Mapping):
        raise SettingsInvalid(f"setting 'cluster': expected a mapping like {{redis_url: redis://host:6379/0}}, "
                              f"got {type(value).__name__}")
    for key, item in value.items():
        kind = CLUSTER_KEYS.get(key)
        if kind is None:
            raise SettingsInvalid(f"setting 'cluster': unknown key '{key}' (known: {', '.join(CLUSTER_KEYS)})")
        if not isinstance(item, kind) or isinstance(item, bool):
            raise SettingsInvalid(f"setting 'cluster.{key}': invalid value of type {type(item).__name__}")
    url = value.get("redis_url", "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise SettingsInvalid("setting 'cluster.redis_url': expected a redis://, rediss:// or unix:// URL")
    if value.get("heartbeat_s", 1) <= 0:
        raise SettingsInvalid("setting 'cluster.heartbeat_s': must be positive")
    return dict(value)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """A list setting's items. A lone string is refused: ``tuple("acme")`` would be its letters."""
    return tuple(str(item) for item in _list(value, where))


def _list(value: Any, where: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        raise SettingsInvalid(f"{where}: expected a list, got the string {value!r} (write [{value}])")
    if not isinstance(value, (list, tuple)):
        raise SettingsInvalid(f"{where}: expected a list, got {value!r}")
    return tuple(value)


def _api_key(entry: Any) -> ApiKey:
    if not isinstance(entry, dict) or "name" not in entry or "sha256" not in entry:
        raise SettingsInvalid("each api_keys entry needs 'name' and 'sha256' (the key's SHA-256 hex digest)")
    where = f"api key '{entry['name']}'"
    unknown = set(entry) - {"name", "sha256", "toolsets", "admin", "may_assert_user", "metrics", "rate_limit",
                            "tool_search"}
    if unknown:
        raise SettingsInvalid(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    flags = {}
    for flag in ("admin", "may_assert_user", "metrics"):
        if not isinstance(entry.get(flag, False), bool):  # bool("false") would grant it
            raise SettingsInvalid(f"{where}: '{flag}' must be true or false, got {entry[flag]!r}")
        flags[flag] = entry.get(flag, False)
    if not isinstance(entry.get("tool_search", False), bool):
        raise SettingsInvalid(f"{where}: 'tool_search' must be true or false, got {entry['tool_search']!r}")
    try:
        limit = None if entry.get("rate_limit") is None else rate_limits.checked(entry["rate_limit"], where)
    except ValueError as exc:
        raise SettingsInvalid(str(exc)) from None
    return ApiKey(str(entry["name"]), str(entry["sha256"]).lower(),
                  _strings(entry.get("toolsets") or [], f"{where}: 'toolsets'"), **flags, rate_limit=limit,
                  tool_search=entry.get("tool_search"))
