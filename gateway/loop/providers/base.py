"""What every provider client shares: HTTP with retries, SSE reading, errors (the request and reply shapes are
``gateway.loop.messages``; each provider translates them to and from its own wire format at its edge).

Retries: a 408, 409, 429 or 5xx answer (``upstream.RETRY_STATUSES``), a connection failure or a timeout is retried
up to ``max_retries`` times, waiting what ``Retry-After`` / ``retry-after-ms`` asks (up to ``MAX_RETRY_AFTER_S``)
or else an exponential backoff.
Other 4xx answers are final: retrying cannot fix them.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from ... import secrets
from ...upstream.http import RETRY_STATUSES, backoff, describe, retry_after
from ..config import ProviderConfig
from ..messages import ModelReply, ModelRequest, ProviderError, ProviderTimeout, Sleep

log = logging.getLogger("gateway.loop")
MAX_RETRY_AFTER_S = 60.0


class HttpProvider(abc.ABC):
    """Base of the provider clients: authenticated JSON POSTs with retries, and SSE streams."""

    tool_format = "openai"  # the gateway.formats name its tool declarations are rendered in
    # Whether a request whose history holds tool calls must still declare the tools (see loop.Turn.ask).
    keeps_tools_for_history = False

    def __init__(self, config: ProviderConfig, http_client: Callable[[], httpx.AsyncClient], *,
                 sleep: Sleep = asyncio.sleep):
        self.config = config
        self._http_client = http_client
        self._sleep = sleep
        self._timeout = httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 10.0))
        url = httpx.URL(config.base_url)
        self.host, self.port = url.host, url.port or (443 if url.scheme == "https" else 80)  # for the event stream

    @abc.abstractmethod
    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry ``api_key`` (and any fixed ones the API wants)."""

    @abc.abstractmethod
    def declare_caller_tool(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A function the caller declared (OpenAI's ``{type: function, function: ...}``) in this API's format."""

    @abc.abstractmethod
    async def complete(self, request: ModelRequest) -> ModelReply:
        """One answer, whole."""

    @abc.abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelReply]:
        """One answer: its text as it arrives, then the whole ``ModelReply``."""

    @property
    def name(self) -> str:
        return self.config.name

    def headers(self) -> tuple[dict[str, str], dict[str, str]]:
        """The request headers, and the secret values they hold (to redact from anything shown)."""
        templates = self.config.headers
        names = {n for t in [self.config.api_key, *templates.values()] if t is not None for n in t.references.secrets}
        try:
            values = secrets.resolve(names)
        except secrets.SecretsMissing as exc:
            raise ProviderError(f"LLM provider '{self.name}': {exc}.") from None
        scope = {"secrets": values}
        key = str(self.config.api_key.render(scope)) if self.config.api_key is not None else None
        headers = {"content-type": "application/json", **self.auth_headers(key)}
        headers.update({name: str(template.render(scope)) for name, template in templates.items()})
        return headers, values

    @asynccontextmanager
    async def post(self, path: str, body: dict[str, Any], extra: Mapping[str, str], *,
                   stream: bool = False) -> AsyncIterator[httpx.Response]:
        """POST ``body`` to ``base_url + path`` with the ``extra`` headers too; yields a successful response (open
        for reading when streaming)."""
        client = self._http_client()
        url = self.config.base_url + path
        headers, values = self.headers()
        headers = {**extra, **headers}
        content = json.dumps(body, ensure_ascii=False).encode()
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            request = client.build_request("POST", url, content=content, headers=headers,
                                           params=dict(self.config.query), timeout=self._timeout)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                failure, delay = self.failure(exc, request.url), None
            else:
                if response.is_success:
                    try:
                        yield response
                    finally:
                        await response.aclose()
                    return
                await response.aread()
                await response.aclose()
                failure = ProviderError(f"LLM provider '{self.name}' answered {response.status_code}: "
                                        f"{secrets.redact(error_message(response), values)}")
                if response.status_code not in RETRY_STATUSES:
                    raise failure
                delay = retry_after(response.headers)
                if delay is not None and delay > MAX_RETRY_AFTER_S:
                    raise ProviderError(f"{failure} (asked to retry after {delay:g} s, longer than the gateway waits)")
            if attempt == attempts:
                raise failure
            wait = delay if delay is not None else backoff(attempt)
            log.warning("%s; retry %d of %d in %.2f s", failure, attempt, attempts - 1, wait)
            await self._sleep(wait)

    async def post_json(self, path: str, body: dict[str, Any], extra: Mapping[str, str]) -> Any:
        async with self.post(path, body, extra) as response, self.reading():
            await response.aread()
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"LLM provider '{self.name}' answered with a body that is not JSON.") from None

    async def events(self, path: str, body: dict[str, Any], extra: Mapping[str, str]) -> AsyncIterator[tuple[str, Any]]:
        """The server-sent events of a streamed answer as (event name, parsed JSON data)."""
        async with self.post(path, body, extra, stream=True) as response, self.reading():
            async for event, data in sse_events(response):
                if data == "[DONE]":
                    return
                try:
                    parsed = json.loads(data)
                except ValueError:
                    raise ProviderError(f"LLM provider '{self.name}' streamed an event that is not JSON.") from None
                yield event, parsed

    @contextmanager
    def malformed(self) -> Iterator[None]:
        """Reading a reply whose shape no client can read (a string where an object belongs, a missing key): the
        provider's failure (502), not the gateway's. Wraps only the reading of parsed JSON, nothing else."""
        try:
            yield
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise ProviderError(f"LLM provider '{self.name}' answered with a malformed reply "
                                f"({type(exc).__name__}: {exc}).") from None

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Failures while reading a body (after the status line) mapped like failures to connect."""
        try:
            yield
        except httpx.HTTPError as exc:
            raise self.failure(exc, httpx.URL(self.config.base_url)) from None

    def failure(self, exc: httpx.HTTPError, url: httpx.URL) -> ProviderError:
        """An httpx exception in words, once, at the boundary (``gateway.upstream.http.describe``)."""
        kind = ProviderTimeout if isinstance(exc, httpx.TimeoutException) else ProviderError
        return kind(f"LLM provider '{self.name}': {describe(exc, url, self.config.timeout_s)}")

    def stream_error(self, data: Mapping[str, Any]) -> ProviderError:
        error = data.get("error")
        message = error.get("message") if isinstance(error, Mapping) else error
        return ProviderError(f"LLM provider '{self.name}' failed while streaming: {message or 'unknown error'}")


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    event, data = "", []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            event = line[6:].strip()
    if data:
        yield event or "message", "\n".join(data)


def error_message(response: httpx.Response, limit: int = 500) -> str:
    """The provider's own explanation: ``error.message`` of a JSON body (OpenAI and Anthropic), else the text."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return (text[:limit] + "…") if len(text) > limit else text or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    return json.dumps(body)[:limit]
