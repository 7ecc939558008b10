"""The /client routes over plain HTTP: the runtime, the declared scripts only (cached by catalog version), the demo."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest


@pytest.fixture
def client(site):
    with httpx.Client(base_url=site.gateway) as client:
        yield client


def test_runtime_is_served_as_javascript_with_a_validator(client):
    """gateway-tools.js is JavaScript with an ETag, and a matching If-None-Match answers 304."""
    response = client.get("/client/gateway-tools.js")
    again = client.get("/client/gateway-tools.js", headers={"If-None-Match": response.headers["etag"]})

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/javascript; charset=utf-8"
    assert "PW.AiTools.register = register" in response.text
    assert again.status_code == 304


def test_declared_script_is_served_with_the_catalog_version_as_etag(site, client, definitions: Path):
    """A browser-bound tool's script is served as written, tagged with the catalog version and the bytes' digest;
    304 while unchanged."""
    response = client.get("/client/scripts/example-tool.js")
    again = client.get("/client/scripts/example-tool.js", headers={"If-None-Match": response.headers["etag"]})

    assert response.status_code == 200
    assert response.content == (definitions / "scripts" / "example-tool.js").read_bytes()
    served = hashlib.sha256(response.content).hexdigest()[:12]
    assert response.headers["etag"] == f'"{site.gateway_app.catalog.version}-{served}"'
    assert response.headers["cache-control"] == "no-cache"
    assert again.status_code == 304


@pytest.mark.parametrize("path", [
    "/client/scripts/square_root.js",  # a server tool: it has no script
    "/client/scripts/no_such_tool.js",
    "/client/scripts/..%2Fpython%2Fexample_tool.js",  # only ids are looked up, never paths
    "/client/scripts/example-tool.yaml",
])
def test_only_declared_scripts_are_served(client, path):
    """Anything but the script of a tool with a browser binding is 404."""
    assert client.get(path).status_code == 404


def test_demo_page_is_served(client):
    """The demo page is HTML that loads the runtime from the gateway and holds the task form."""
    response = client.get("/client/demo")

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script src="/client/gateway-tools.js"></script>' in response.text
    assert '<form id="task-form"' in response.text
