"""Helpers for tests (import as ``from support import ...``)."""

from __future__ import annotations

from pathlib import Path

from gateway.catalog import Catalog, build_catalog
from gateway.definitions import load_definitions
from gateway.settings import Settings

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tool-definitions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def catalog_for(root: Path, **settings: object) -> Catalog:
    """Load and build a catalog from ``root`` with default settings (overridable)."""
    effective = Settings(definitions=root, **settings)
    return build_catalog(load_definitions(root), effective)
