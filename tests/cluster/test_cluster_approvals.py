"""Approvals across replicas sharing Redis: a call asked on one replica, approved on another, runs once on a third;
the approval is used once whichever replica the next call lands on."""

from __future__ import annotations

import httpx
from cluster_support import Cluster

APPROVED_PAUSE = """\
tools:
  - id: guarded_pause
    name: Guarded pause
    user_description: Waits, once an admin said yes.
    ai_description: Waits the given number of seconds.
    binding:
      python: cluster_tools:pause
    approval: {approvers: [admins]}
"""


def test_an_approval_given_on_one_replica_lets_the_call_run_once_on_another(cluster: Cluster) -> None:
    cluster.edit_definitions("guarded.yaml", APPROVED_PAUSE)
    try:
        first, second, third = (replica.url for replica in cluster.replicas)
        cluster.wait_until(lambda: all(httpx.get(f"{url}/tools/guarded_pause", headers=cluster.headers(),
                                                 timeout=5).status_code == 200 for url in (first, second, third)),
                           what="every replica to serve the guarded tool")
        asked = httpx.post(f"{first}/tools/guarded_pause/call", json={"seconds": 0}, headers=cluster.headers(),
                           timeout=10)
        assert asked.status_code == 202, asked.text
        approval = asked.json()["approval"]["id"]
        listed = httpx.get(f"{second}/admin/api/approvals", headers=cluster.headers(admin=True), timeout=10)
        assert [a["id"] for a in listed.json()["approvals"]] == [approval]
        decided = httpx.post(f"{second}/approvals/{approval}", json={"decision": "approve"},
                             headers=cluster.headers(admin=True), timeout=10)
        assert decided.status_code == 200, decided.text
        ran = httpx.post(f"{third}/tools/guarded_pause/call", json={"seconds": 0}, headers=cluster.headers(),
                         timeout=10)
        assert ran.status_code == 200 and ran.json()["result"] == 0, ran.text
        replayed = httpx.post(f"{first}/tools/guarded_pause/call", json={"seconds": 0}, headers=cluster.headers(),
                              timeout=10)
        assert replayed.status_code == 202 and replayed.json()["approval"]["id"] != approval
    finally:
        (cluster.definitions / "guarded.yaml").unlink()
        cluster.wait_until(lambda: all(httpx.get(f"{r.url}/tools/guarded_pause", headers=cluster.headers(),
                                                 timeout=5).status_code == 404 for r in cluster.replicas),
                           what="every replica to drop the guarded tool")
