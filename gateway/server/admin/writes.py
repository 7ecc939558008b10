"""What makes a request an admin *write* (a reload, a check, a save, a new file) rather than something a web page
could have sent: never a request a browser sends without asking the gateway first (a CORS-"simple" one).

A page on another origin can make the browser send a ``POST`` with a ``text/plain`` body and no custom header
without any preflight (``no-cors``); with auth off and a loopback caller, that was enough to save files and to run
a draft's commands. So every admin write needs

- a JSON body said to be one (``Content-Type: application/json``) when it has a body: another type is 415;
- a header a page cannot send without a preflight, holding a proof the page could only have read from the
  gateway itself: with auth on, the admin key (``Authorization``); with auth off, the console token,
  ``X-Gateway-Token``, which ``GET /admin/api/token`` answers to a loopback caller. A page on another origin cannot
  read that answer (admin routes answer no origin but the gateway's own and those ``allowed_origins`` lists:
  ``origins.AllowedOrigins.listed``), nor send the header (its preflight is refused the same way).

The token is random per process, made at start-up: a restart invalidates it, and the console fetches it again.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request

from ...errors import Forbidden, UnsupportedMediaType

TOKEN_HEADER = "X-Gateway-Token"


class WriteGuard:
    def __init__(self, auth_enabled: bool):
        self.auth_enabled = auth_enabled
        self.token = secrets.token_urlsafe(32)

    def check(self, request: Request) -> None:
        """Raise unless ``request`` (from an admin caller) carries what a page on another origin could not send."""
        headers = request.headers
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        if has_body and media_type != "application/json":
            raise UnsupportedMediaType(f"Admin writes take a JSON body sent as 'Content-Type: application/json', "
                                       f"not {media_type or 'no content type'!r}.")
        if self.auth_enabled:  # the admin key came in Authorization: no page sends that without a preflight
            return
        presented = headers.get(TOKEN_HEADER.lower(), "")
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            raise Forbidden(f"With auth off, admin writes need the console token in the {TOKEN_HEADER} header "
                            "(GET /admin/api/token answers it on this machine): a web page must not be able to "
                            "drive the gateway." + (" The token sent is not this process's (it restarted?)."
                                                    if presented else ""))
