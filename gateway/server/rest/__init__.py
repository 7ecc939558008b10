"""The REST surface: ``/tools`` and calls (``surface``), its JSON fast path, and the OpenAPI document."""
