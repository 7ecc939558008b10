"""The console's editor: list, open, check, save and create definitions files (``files`` does the disk).

- ``GET /admin/api/files``: ``{read_only, read_only_reason, files: [{path, bytes, sha256}]}``.
- ``GET /admin/api/files/{path}``: ``{path, text, sha256}``.
- ``POST /admin/api/check`` ``{path, text}``: ``{ok, problems}`` — the whole catalog built with the draft in
  place of the file, in memory (``gateway.catalog.drafts``); nothing is written.
- ``PUT /admin/api/files/{path}`` ``{text, base_sha256}``: 403 when read-only, 409 when the file changed on disk
  since ``base_sha256``, 422 with ``problems`` when the catalog would not build (nothing written); else the file
  is replaced atomically, the gateway reloads, and the answer is ``{ok, path, sha256, reload}`` (``ok``: the
  reload served it).
- ``POST /admin/api/files`` ``{path, template}``: a new file from a template (``templates``), 409 if it
  exists; then a reload, answered as a save is.

Every route needs an admin caller; ``check``, ``save`` and ``create`` are writes (``writes``). A check
never connects to a draft's upstreams (``gateway.catalog.drafts``).

A draft may be as large as a definitions file may be (``max_file_bytes``); its request body, JSON-escaped,
twice that. Saves and creations are ``admin`` events with the path and digests, never the text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...catalog.drafts import DraftChecker
from ...errors import BadRequest, PayloadTooLarge
from ...runtime.gateway import Gateway
from ..http.auth import Caller
from ..http.bodies import parse_json, read_body
from ..http.errors import error_response, json_response
from .files import Conflict, DefinitionsFiles
from .templates import new_files

BODY_SLACK = 65_536  # the JSON around a draft


def routes(gateway: Gateway, files: DefinitionsFiles, *, admin: Callable[..., Caller]) -> list[Route]:
    editor = Editor(gateway, files, admin)
    return [
        Route("/admin/api/files", editor.listing, methods=["GET"]),
        Route("/admin/api/files", editor.create, methods=["POST"]),
        Route("/admin/api/files/{path:path}", editor.read, methods=["GET"]),
        Route("/admin/api/files/{path:path}", editor.save, methods=["PUT"]),
        Route("/admin/api/check", editor.check, methods=["POST"]),
    ]


class Editor:
    def __init__(self, gateway: Gateway, files: DefinitionsFiles, admin: Callable[..., Caller]):
        self.gateway = gateway
        self.files = files
        self.admin = admin
        self.drafts = DraftChecker(gateway.settings)

    async def listing(self, request: Request) -> Response:
        await self.admin(request)
        reason = await run_in_threadpool(self.files.read_only_reason)
        listed = await run_in_threadpool(self.files.listing)
        return json_response({"read_only": reason is not None, "read_only_reason": reason, "files": listed})

    async def read(self, request: Request) -> Response:
        await self.admin(request)
        path = request.path_params["path"]
        text, digest = await run_in_threadpool(self.files.read, path)
        return json_response({"path": path, "text": text, "sha256": digest})

    async def check(self, request: Request) -> Response:
        await self.admin(request, write=True)  # a check builds (imports admin code): as guarded as a save
        body = await self._body(request, path=str, text=str)
        await run_in_threadpool(self.files.exists, body["path"])
        problems = await self._check(body["path"], body["text"])
        return json_response({"ok": not any(p["severity"] == "error" for p in problems), "problems": problems})

    async def save(self, request: Request) -> Response:
        caller = await self.admin(request, write=True)
        await run_in_threadpool(self.files.check_writable)
        path = request.path_params["path"]
        body = await self._body(request, text=str, base_sha256=str)
        text, base = body["text"], body["base_sha256"]
        _, current = await run_in_threadpool(self.files.read, path)
        if current != base:  # before the check: a stale editor learns it at once, not after a build
            raise Conflict(f"Definitions file {path!r} changed on disk since it was opened (it now has sha256 "
                           f"{current}): open it again and redo the edit.")
        problems = await self._check(path, text)
        errors = [p for p in problems if p["severity"] == "error"]
        if errors:
            return error_response(422, f"Not saved: the catalog would not build with this version of {path!r} "
                                       f"({len(errors)} problem(s)).", problems=problems)
        digest = await run_in_threadpool(self.files.save, path, text, base)  # compares the digest again
        self.gateway.events.emit("admin", action="edit", caller=caller.name,
                                 detail={"path": path, "sha256": digest, "base_sha256": base,
                                         "bytes": len(text.encode())})
        return await self._reloaded(path, digest)

    async def create(self, request: Request) -> Response:
        caller = await self.admin(request, write=True)
        await run_in_threadpool(self.files.check_writable)
        body = await self._body(request, path=str, template=str)
        path, template = body["path"], body["template"]
        self.files.locate(path)  # a bad path is refused before a template is made for it
        made = new_files(template, path, self.gateway.catalog.tools)
        digest = await run_in_threadpool(self.files.create, path, made.definitions, made.modules)
        self.gateway.events.emit("admin", action="create", caller=caller.name,
                                 detail={"path": path, "sha256": digest, "template": template,
                                         "modules": sorted(made.modules)})
        return await self._reloaded(path, digest, status=201)

    async def _reloaded(self, path: str, digest: str, status: int = 200) -> Response:
        outcome = await self.gateway.reload()
        return json_response({"ok": outcome.ok, "path": path, "sha256": digest, "reload": outcome.as_dict()}, status)

    async def _check(self, path: str, text: str) -> list[dict[str, Any]]:
        if len(text.encode()) > self.files.max_bytes:
            raise PayloadTooLarge(f"The draft of {path!r} is over max_file_bytes ({self.files.max_bytes} bytes).")
        return [problem.as_dict() for problem in await self.drafts.check(path, text)]

    async def _body(self, request: Request, **fields: type) -> dict[str, Any]:
        """The request's JSON object, with each of ``fields`` present and of its type."""
        body = parse_json(await read_body(request, 2 * self.files.max_bytes + BODY_SLACK))
        if not isinstance(body, dict):
            raise BadRequest("Request body must be a JSON object.")
        for name, kind in fields.items():
            if not isinstance(body.get(name), kind):
                raise BadRequest(f"Request body needs {name!r} ({kind.__name__}).")
        return body
