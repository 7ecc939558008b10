"""``tool-gateway`` (or ``python -m gateway``): serve, validate, list, call, export, test, chat, status.

Exit codes: 0 success; 1 invalid definitions, a tool call that returned an error, a failed contract test, or a
running gateway that is degraded or whose replicas serve different versions (``status``);
2 bad usage or settings (and, for ``test``, definitions that do not build: nothing was tested).
Domain errors become one message per problem on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..catalog.build import build_catalog
from ..catalog.lock import LOCK_FILE, approved
from ..catalog.lock import compare as compare_lock
from ..catalog.lock import lock as lock_document
from ..catalog.lock import read as read_lock
from ..catalog.lock import write as write_lock
from ..catalog.snapshot import Catalog
from ..context import CallContext
from ..errors import DefinitionsInvalid, GatewayError, UnknownTool
from ..settings import Settings, load_settings
from ..sources import load_all
from ..upstream.mcp.config import CREDENTIALS_REFUSED

# httpx imports its own command-line client (click, pygments and rich: ~0.1 s) whenever they happen to be installed
# (the test extras bring rich); this program never runs it. Marked absent before anything imports httpx, httpx keeps
# its stub ``httpx.main``, as in an install without them. Here, in the program's entry point, not in the package:
# importing a library must not change its host's modules.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

DEFAULT_DIR = "tool-definitions"
# Options every command takes, on either side of the command's name: flag -> add_argument keywords.
GLOBAL_OPTIONS = {
    "--settings": {"metavar": "FILE", "help": "settings file (YAML); also TOOL_GATEWAY_SETTINGS"},
}
GLOBAL_TITLE = "global options (before or after the command)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a worker of `serve --workers N` runs again
    try:
        return args.run(args)
    except DefinitionsInvalid as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return exc.exit_code
    except GatewayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tool-gateway", description="A declarative tool gateway for LLMs.", parents=[_global_options(after=False)],
        epilog="Global options may come before or after the command: 'tool-gateway --settings FILE serve' and "
               "'tool-gateway serve --settings FILE' are the same; given on both sides, the one after wins.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Every command's own parser takes the global options too, so that they may follow the command.
    command = functools.partial(sub.add_parser, parents=[_global_options(after=True)])

    serve = command("serve", help="serve the tools over REST, MCP and the chat endpoint")
    serve.add_argument("definitions", nargs="?", help=f"definitions directory (default: ./{DEFAULT_DIR})")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument("--no-reload", dest="reload", action="store_const", const=False,
                       help="do not watch the definitions for changes")
    serve.add_argument("--reload-poll", action="store_const", const=True,
                       help="watch by polling (for NFS and mounts without inotify)")
    serve.add_argument("--workers", type=_positive, default=1, metavar="N",
                       help="serve from N processes on one port, each a replica (N > 1 needs cluster.redis_url)")
    serve.set_defaults(run=_serve)

    validate = command("validate", help="check definitions; print every problem as file:line:col")
    validate.add_argument("definitions", nargs="?")
    validate.add_argument("--locked", action="store_true",
                          help=f"also fail when a source's or plugin's tool differs from {LOCK_FILE}")
    validate.set_defaults(run=_validate)

    locking = command("lock", help=f"record what the sources' and plugins' tools say now, in DIR/{LOCK_FILE}")
    locking.add_argument("definitions", nargs="?")
    locking.add_argument("--tool", action="append", default=[], metavar="ID",
                         help="approve this tool alone (again for more): the rest of the lock stays as it is")
    locking.set_defaults(run=_lock)

    listing = command("list", help="list the tools")
    listing.add_argument("definitions", nargs="?")
    listing.add_argument("--json", action="store_true", help="print the REST listing as JSON")
    listing.set_defaults(run=_list)

    found = command("search", help="the tools that best fit a request, best first (as GET /tools/search)")
    found.add_argument("definitions", help="definitions directory")
    found.add_argument("text", help="what is asked, in words")
    found.add_argument("-k", type=int, default=8, help="how many tools (default 8, at most 50)")
    found.add_argument("--json", action="store_true", help="print the REST answer as JSON")
    found.set_defaults(run=_search)

    call = command("call", help="call one tool and print its result")
    call.add_argument("tool_id")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object, or a bare value for a one-parameter tool")
    call.add_argument("--definitions", "-d")
    call.add_argument("--conversation-id")
    call.add_argument("--user")
    call.set_defaults(run=_call)

    export = command("export", help="print the tools in a provider's declaration format")
    export.add_argument("definitions", nargs="?")
    export.add_argument("--format", "-f", required=True, choices=["openai", "openai-strict", "openai-responses", "anthropic", "gemini", "mcp"])
    export.set_defaults(run=_export)

    test = command("test", help="contract tests: run every tool's examples, and arguments drawn from its input "
                   "schema, through the call path")
    test.add_argument("definitions", nargs="?")
    test.add_argument("--tool", action="append", default=[], metavar="ID", help="test this tool (repeatable)")
    test.add_argument("--toolset", action="append", default=[], metavar="NAME",
                      help="test the tools of this toolset (repeatable)")
    test.add_argument("--samples", type=int, default=20, metavar="N", help="argument sets drawn per tool (default 20)")
    test.add_argument("--seed", type=int, default=0, help="seed of the drawn arguments (default 0: the same every run)")
    test.add_argument("--no-generated", dest="generated", action="store_false", help="run the examples only")
    test.add_argument("--include-writes", action="store_true",
                      help="draw arguments for tools not annotated read_only too")
    test.add_argument("--live", action="store_true",
                      help="call tools that reach outside the process (http bindings, upstreams)")
    test.add_argument("--time-budget", type=float, default=20.0, metavar="SECONDS",
                      help="per tool, for drawing and calling with generated arguments (default 20)")
    test.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    test.set_defaults(run=_test)

    plugins = command("plugins", help="list the installed plugins, whether the settings enable them, their tools")
    plugins.set_defaults(run=_plugins)

    importing = command("import", help="write an API's operations as YAML tool definitions to edit by hand")
    kinds = importing.add_subparsers(dest="kind", required=True, metavar="KIND")
    openapi = kinds.add_parser("openapi", help="an OpenAPI 3.0/3.1 document (file or URL)",
                               parents=[_global_options(after=True)])
    openapi.add_argument("spec", help="path or http(s) URL of the document")
    openapi.add_argument("--include", action="append", default=[], metavar="NAME",
                         help="operationId or glob to import (repeatable; default: all)")
    openapi.add_argument("--exclude", action="append", default=[], metavar="NAME", help="operationId or glob to skip")
    openapi.add_argument("--prefix", default="", help="prepended to every tool id")
    openapi.add_argument("--security", action="append", default=[], metavar="SCHEME=VALUE",
                         help="a security scheme's value, e.g. api_key='{{ secrets.PET_KEY }}' (repeatable)")
    openapi.add_argument("--server-url", help="base URL of the API instead of the document's servers[0]")
    openapi.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    openapi.set_defaults(run=_import_openapi)

    status = command("status", help="ask a running gateway how it is: catalog, shared state, with --cluster "
                     "every replica and whether they serve one version (admin key: TOOL_GATEWAY_ADMIN_KEY)")
    status.add_argument("--cluster", action="store_true", help="list the live replicas; exit 1 if versions differ")
    status.add_argument("--url", help="the gateway, a replica or the load balancer (default: from the settings)")
    status.set_defaults(run=_status)

    chat = command("chat", help="run one chat turn against the configured LLM, executing tools")
    chat.add_argument("message")
    chat.add_argument("--definitions", "-d")
    chat.add_argument("--provider", help="provider name from the settings (default: chat.provider)")
    chat.set_defaults(run=_chat)
    return parser


def _global_options(*, after: bool) -> argparse.ArgumentParser:
    """A parent parser holding ``GLOBAL_OPTIONS``. After the command, an option not given must leave the value
    parsed before the command alone: its default there is ``SUPPRESS`` (no attribute set), not ``None``."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group(GLOBAL_TITLE)
    for flag, keywords in GLOBAL_OPTIONS.items():
        group.add_argument(flag, default=argparse.SUPPRESS if after else None, **keywords)
    return parser


def _settings(args: argparse.Namespace, **overrides: object) -> Settings:
    directory = getattr(args, "definitions", None)
    return load_settings(args.settings, definitions=Path(directory) if directory else None, **overrides)


def _catalog(args: argparse.Namespace) -> Catalog:
    settings = _settings(args)
    # The same sources and file limits as a served gateway (plugins, max_file_bytes, max_yaml_nodes).
    definitions, plugins = load_all(settings)
    return build_catalog(definitions, settings, plugins=plugins)


def _plugins(args: argparse.Namespace) -> int:
    from ..definitions.load import load_definitions
    from ..definitions.yamlbudget import YamlLimits
    from ..sources.plugins import installed

    settings = _settings(args)
    found = installed()
    if not found:
        print("no plugins installed (entry point group tool_gateway.plugins)")
    for plugin in found:
        enabled = "*" in settings.plugins or plugin.name in settings.plugins
        print(f"{plugin.name}  {plugin.distribution} {plugin.version}  {'enabled' if enabled else 'not enabled'}")
        if plugin.directory is None:
            print(f"  error: {plugin.error}")
            continue
        loaded = load_definitions(plugin.directory, limits=YamlLimits.from_settings(settings), label=f"{plugin.name}:")
        for tool in loaded.tools:
            print(f"  {tool.id}  {tool.scope.value}  {tool.name}")
        for problem in loaded.problems:
            print(f"  {problem}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    for warning in catalog.warnings:
        print(warning, file=sys.stderr)
    # A down upstream is a warning (it may be up when the gateway serves); one that refuses the credentials
    # will refuse them then too.
    refused = [source for source in catalog.sources if source.get("http_status") in CREDENTIALS_REFUSED]
    for source in refused:
        print(f"error: source '{source.get('id')}' refused the gateway's credentials (HTTP "
              f"{source['http_status']}): check its headers", file=sys.stderr)
    if refused:
        return 1
    if args.locked:
        try:
            differences = compare_lock(read_lock((catalog.root / LOCK_FILE).read_text(encoding="utf-8")), catalog)
        except (OSError, ValueError) as exc:
            print(f"error: {catalog.root / LOCK_FILE}: {exc}; record it with `tool-gateway lock`", file=sys.stderr)
            return 1
        for difference in differences:
            print(f"error: {LOCK_FILE}: {difference}", file=sys.stderr)
        if differences:
            return 1
    print(f"ok: {len(catalog.tools)} tool(s) in {catalog.root} (version {catalog.version})")
    return 0


def _lock(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    document = lock_document(catalog)
    path = catalog.root / LOCK_FILE
    if args.tool:
        try:
            document = approved(read_lock(path.read_text(encoding="utf-8")), document, args.tool)
        except (OSError, ValueError) as exc:
            print(f"error: {path}: {exc}; record the whole lock with `tool-gateway lock`", file=sys.stderr)
            return 1
        except KeyError as exc:
            print(f"error: no tool {exc} is served or locked", file=sys.stderr)
            return 1
    write_lock(path, document)
    print(f"approved {', '.join(args.tool)} in {path}" if args.tool else
          f"locked {len(document['tools'])} tool(s) of sources and plugins in {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    if args.json:
        listing = {"tools": [t.describe() for t in catalog.tools.values()], "sources": list(catalog.sources)}
        print(json.dumps(listing, indent=2, ensure_ascii=False))
        return 0
    width = max((len(t) for t in catalog.tools), default=2)
    for tool in catalog.tools.values():
        print(f"{tool.id:<{width}}  {tool.scope.value:<6}  {tool.definition.name} — {tool.definition.user_description}")
    for source in catalog.sources:
        error = f"  ({source['error']})" if source.get("error") else ""
        print(f"source {source['id']}  {source['kind']}  {source['tools']} tool(s)  {source['health']}{error}")
    return 0


def _search(args: argparse.Namespace) -> int:
    from ..search import MAX_K
    from ..search.index import index_of

    if not 1 <= args.k <= MAX_K:
        print(f"-k must be from 1 to {MAX_K}", file=sys.stderr)
        return 2
    catalog = _catalog(args)
    found = index_of(catalog, _settings(args).tool_search.dense).search(args.text, args.k, "all", lambda tool: True)
    if args.json:
        print(json.dumps({"tools": [hit.entry() for hit in found]}, indent=2, ensure_ascii=False))
        return 0
    width = max((len(hit.tool.id) for hit in found), default=2)
    for hit in found:
        alike = f"  (alike: {', '.join(tool.id for tool in hit.alike)})" if hit.alike else ""
        print(f"{hit.score:7.3f}  {hit.tool.id:<{width}}  {hit.tool.definition.name}{alike}")
    return 0 if found else 1


def _import_openapi(args: argparse.Namespace) -> int:
    from ..sources.openapi_import import import_openapi

    security = dict(item.partition("=")[::2] for item in args.security)
    imported = import_openapi(args.spec, _settings(args), include=args.include, exclude=args.exclude,
                              prefix=args.prefix, security=security, server_url=args.server_url)
    for problem in imported.problems:
        if problem.severity != "error":
            print(problem, file=sys.stderr)
    if any(p.severity == "error" for p in imported.problems):
        raise DefinitionsInvalid([p for p in imported.problems if p.severity == "error"])
    if args.output:
        Path(args.output).write_text(imported.text, encoding="utf-8")
        print(f"wrote {imported.count} tool(s) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(imported.text)
    return 0


def _call(args: argparse.Namespace) -> int:
    from ..invoke import invoke

    catalog = _catalog(args)
    context = CallContext(conversation_id=args.conversation_id, user=args.user, surface="cli")
    result = asyncio.run(invoke(catalog, args.tool_id, args.arguments, context))
    if result.is_error:
        print(result.text, file=sys.stderr)
        return 1
    print(result.text)
    return 0


def _export(args: argparse.Namespace) -> int:
    from ..formats import render

    catalog = _catalog(args)
    rendered = render(catalog, args.format)
    for diagnostic in rendered.diagnostics:
        print(f"warning: {diagnostic}", file=sys.stderr)
    print(json.dumps(rendered.tools, indent=2, ensure_ascii=False))
    return 0


def _test(args: argparse.Namespace) -> int:
    from ..contract.junit import write_junit
    from ..contract.run import Options, UntestableDefinitions, report_lines, run_contract, select

    try:
        catalog = _catalog(args)
    except DefinitionsInvalid as exc:
        raise UntestableDefinitions(exc.problems) from None
    for warning in catalog.warnings:
        print(warning, file=sys.stderr)
    try:
        tools = select(catalog, args.tool, args.toolset)
    except UnknownTool as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = Options(samples=args.samples, seed=args.seed, live=args.live, include_writes=args.include_writes,
                      generated=args.generated, time_budget_s=args.time_budget)
    print(f"testing {len(tools)} tool(s) in {catalog.root} (version {catalog.version})")
    reports = asyncio.run(run_contract(catalog, tools, options))
    for line in report_lines(reports):
        print(line)
    if args.junit:
        write_junit(reports, args.junit)
    return 1 if any(report.status == "failed" for report in reports) else 0


def _serve(args: argparse.Namespace) -> int:
    from ..observe.logs import configure_logging
    from ..server import workers
    from ..server.app import GRACEFUL_SHUTDOWN_S, bind_host, serve

    settings = _settings(args, host=args.host, port=args.port, reload=args.reload, reload_poll=args.reload_poll)
    if args.workers > 1 and workers.worker_label() is None:  # the supervisor; each worker serves as one process
        try:
            workers.check(args.workers, settings)
            configure_logging(settings)
            supervisor = workers.Supervisor(args.workers, bind_host(settings), settings.port, args.argv,
                                            GRACEFUL_SHUTDOWN_S)
        except (workers.NeedsSharedState, workers.CannotListen) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return supervisor.run()
    serve(settings)
    return 0


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def _status(args: argparse.Namespace) -> int:
    from ..upstream.address import base_url
    from .status import fetch, report

    settings = _settings(args)  # read even with --url: a bad settings file is an error for every command
    url = args.url or base_url(settings)
    lines, healthy = report(fetch(url), url, cluster=args.cluster)
    print("\n".join(lines))
    return 0 if healthy else 1


def _chat(args: argparse.Namespace) -> int:
    from ..loop.cli import run_chat

    return run_chat(_settings(args), args.message, provider=args.provider)


if __name__ == "__main__":
    sys.exit(main())
