"""Fixtures of the cluster tests (the helpers are in ``cluster_support``).

``cluster`` is one 3-replica cluster shared by the session (starting one costs seconds); a test that breaks it
(kills a replica, stops Redis) leaves the repair to the fixture, which brings every part back after the test.
``cluster_support.start_cluster`` builds another one for tests that need other definitions or settings.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_support import ADMIN_KEY, API_KEY, Cluster, start_cluster
from fake_llm import FakeLLM, Servers

# Names tests imported from here before cluster_support held them; a test module should import them from
# cluster_support (another directory's conftest may be the module named ``conftest`` in a whole-suite run).
__all__ = ["ADMIN_KEY", "API_KEY", "Cluster", "start_cluster"]


@pytest.fixture(scope="session")
def fake_llm(servers: Servers) -> FakeLLM:
    """One scripted LLM (OpenAI wire format) on 127.0.0.1 for every cluster."""
    llm = FakeLLM()
    llm.url = servers.start(llm.openai_app())
    return llm


@pytest.fixture(scope="session")
def _running_cluster(tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeLLM) -> Iterator[Cluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"), fake_llm)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(_running_cluster: Cluster) -> Iterator[Cluster]:
    """The session's 3-replica cluster behind nginx, whole again after each test."""
    _running_cluster.heal()
    yield _running_cluster
    _running_cluster.heal()
