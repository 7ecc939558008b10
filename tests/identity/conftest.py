"""Fixtures for the identity tests: a real authorization server (idp.py) shared by a module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from identity.idp import IdentityProvider, confidential_client, running_idp


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """The default users (alice, bob, carol) and one pre-registered confidential client, ``gateway``, with every
    grant. A test that changes the next user sets it back (the server is shared by the module)."""
    with running_idp(tmp_path_factory.mktemp("idp") / "idp.log", clients=[confidential_client("gateway")]) as server:
        yield server
