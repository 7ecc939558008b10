"""Headers added to a response as it is sent: the version headers every response carries and the ``Vary: Origin``
CORS would add. Shared by ``front.Front`` and the fast paths below it (``rest.fast``, ``mcp``), which answer
before Starlette and so add them themselves."""

from __future__ import annotations

from starlette.types import Message, Send

VARY = b"vary"
VARY_ORIGIN = (VARY, b"Origin")


def adding(send: Send, added: list[tuple[bytes, bytes]], *, vary_origin: bool = False) -> Send:
    """``send``, adding ``added`` to the response start; with ``vary_origin``, also ``Origin`` to its ``Vary``
    (as CORS does for a request without an allowed origin: the answer would differ for one with it)."""

    async def send_adding(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            if vary_origin:
                _vary_origin(headers)
            headers += added
            message["headers"] = headers
        await send(message)

    return send_adding


def _vary_origin(headers: list[tuple[bytes, bytes]]) -> None:
    """Add ``Origin`` to the response's ``Vary``: one header, where the first was (Starlette's CORS, exactly)."""
    found = [index for index, (name, _) in enumerate(headers) if name == VARY]
    if not found:
        headers.append(VARY_ORIGIN)
        return
    value = b", ".join([*(headers[index][1] for index in found), b"Origin"])
    for index in reversed(found[1:]):
        del headers[index]
    headers[found[0]] = (VARY, value)
