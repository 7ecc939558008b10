"""In CI every upstream of the federation matrix must run: a peer that is not installed skips its tests elsewhere
(saying how to install it), but fails here under CI, so that the matrix cannot pass there by skipping."""

from __future__ import annotations

import os

import pytest
from matrix import PEERS


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI only (env CI): elsewhere a missing peer skips its tests")
def test_every_peer_of_the_matrix_is_installed_in_ci():
    missing = sorted({peer.missing for peer in PEERS if peer.missing})
    assert not missing, "README's test command installs them: " + "; ".join(missing)
