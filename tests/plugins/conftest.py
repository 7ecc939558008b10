"""A fake installed plugin: a package and its ``*.dist-info`` in a temporary directory put on ``sys.path``."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from plugin_support import GREET_PY, GREET_YAML


@pytest.fixture
def install_plugin(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Install a fake plugin (entry point name -> package with ``tools/`` holding ``files``); returns its package.

    Package names are unique per test, so modules imported by one test never answer for another.
    """
    site = tmp_path / "site"
    site.mkdir()
    sys.path.insert(0, str(site))
    packages: list[str] = []

    def install(name: str, files: dict[str, str] | None = None, *, version: str = "1.0") -> str:
        package = f"gwplugin_{name}_{abs(hash(tmp_path)) % 10**8}"
        files = files if files is not None else {"tools.yaml": GREET_YAML.format(prefix=f"{name}_"),
                                                 "python/helpers.py": GREET_PY}
        (site / package).mkdir(exist_ok=True)
        (site / package / "__init__.py").write_text("")
        for relative, text in files.items():
            path = site / package / "tools" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())
        for old in site.glob(f"{package}-*.dist-info"):
            for file in old.iterdir():
                file.unlink()
            old.rmdir()
        info = site / f"{package}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[tool_gateway.plugins]\n{name} = {package}:tools\n")
        importlib.invalidate_caches()
        packages.append(package)
        return package

    yield install
    sys.path.remove(str(site))
    for name in [n for n in sys.modules if any(n == p or n.startswith(p + ".") for p in packages)]:
        del sys.modules[name]
    importlib.invalidate_caches()
