"""Fixtures for the resource-server tests: a programmable issuer (issuer.py) and a gateway that accepts its tokens
under rules that give people different toolsets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from issuer import Issuer, issuing
from oauth_support import AUDIENCE, CODE, RULES, TOOLS
from support import RunningServer, running

from gateway.identity.config import parse


@pytest.fixture(scope="module")
def definitions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("people")
    (root / "people.yaml").write_text(TOOLS, encoding="utf-8")
    (root / "python").mkdir()
    (root / "python" / "people.py").write_text(CODE, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with issuing() as issuer:
        yield issuer


@pytest.fixture
def gateway_for(definitions: Path) -> Callable[..., AbstractContextManager[RunningServer]]:
    """``with gateway_for(issuer, **oauth_settings) as served``: a gateway accepting ``issuer``'s tokens."""

    @contextmanager
    def serve(issuer: Issuer, *, settings: dict[str, Any] | None = None, **oauth: Any) -> Iterator[RunningServer]:
        config = parse({"issuer": issuer.url, "audience": AUDIENCE, "rules": RULES,
                        "jwks": {"refresh_min_s": 0, "timeout_s": 2}, **oauth})
        with running(definitions, oauth=config, **(settings or {})) as served:
            yield served

    return serve
