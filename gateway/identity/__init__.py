"""Who a caller is when it comes with an OAuth 2.1 access token: the settings (``config``), the issuer's keys
(``fetch``, ``keys``), the token's check (``tokens``) and what its claims grant (``grants``). Imports nothing
eagerly."""
