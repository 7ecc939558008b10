"""A same-host redirect from http to https (the default port) keeps the headers holding secrets."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from http_tools import http_tool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support import free_socket

from gateway.invoke import invoke
from gateway.upstream.http import new_client


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


async def _headers(request: Request) -> JSONResponse:
    return JSONResponse({"scheme": request.url.scheme, "headers": dict(request.headers)})


@pytest.fixture(scope="module")
def tls_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """An https server on a free port of 127.0.0.1 echoing the headers it got: (port, its certificate)."""
    cert_file, key_file = _certificate(tmp_path_factory.mktemp("tls"))
    sock = free_socket()
    config = uvicorn.Config(Starlette(routes=[Route("/headers", _headers)]), log_level="warning", lifespan="off",
                            ssl_certfile=str(cert_file), ssl_keyfile=str(key_file))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.01)
    assert server.started, "the TLS test server did not start"
    yield sock.getsockname()[1], cert_file
    server.should_exit = True
    thread.join(15)
    sock.close()


class _Port443To(httpcore.AsyncNetworkBackend):
    """Connects 127.0.0.1:443 to the test's TLS port, so https://127.0.0.1/ (the default port) reaches it."""

    def __init__(self, port: int):
        self.port = port
        self.backend = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, **options: Any) -> httpcore.AsyncNetworkStream:
        return await self.backend.connect_tcp(host, self.port if port == 443 else port, **options)

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


async def test_http_to_https_upgrade_keeps_secret_headers(upstream, build_tools, tls_upstream, monkeypatch):
    """Redirected from http://127.0.0.1:P to https://127.0.0.1/ (same host), the secret header is still sent."""
    port, cert_file = tls_upstream
    monkeypatch.setenv("HTTP_UPGRADE_TOKEN", "upgrade-secret-value")
    context = ssl.create_default_context(cafile=str(cert_file))
    transport = httpx.AsyncHTTPTransport(verify=context)
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=context, network_backend=_Port443To(port))
    http = {"url": upstream.at("/redirect?to=https://127.0.0.1/headers"),
            "headers": {"X-Key": "{{ secrets.HTTP_UPGRADE_TOKEN }}", "X-Plain": "kept"}}
    async with new_client(tls=transport) as client:
        catalog = build_tools(http_tool(http), client=client)
        result = await invoke(catalog, "t")
    assert not result.is_error, result.text
    assert result.value["scheme"] == "https"
    assert result.value["headers"]["x-key"] == "[secret HTTP_UPGRADE_TOKEN]"  # sent, and redacted in the result
    assert result.value["headers"]["x-plain"] == "kept"
