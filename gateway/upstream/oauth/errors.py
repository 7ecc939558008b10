"""Why the gateway could not get a token, in words that name no credential (a module of its own: the server's
OAuth pages import these without the SDK's client side)."""

from __future__ import annotations


class DiscoveryFailed(Exception):
    """The authorization server cannot be found or used (discovery, registration)."""


class TokenFailed(Exception):
    """The token endpoint refused or failed, or the authorization response is not one to trust; ``error`` is the
    server's OAuth error code (``invalid_grant``, ...) when it gave one."""

    def __init__(self, message: str, error: str = ""):
        super().__init__(message)
        self.error = error


class FlowUnknown(Exception):
    """No authorization under way has this state (never made, used already, or expired)."""
