"""The package's public surface is exactly what __all__ states."""

import gateway


def test_all_names_are_importable_and_complete():
    """Every name in gateway.__all__ exists, and every public name defined there is listed."""
    assert all(hasattr(gateway, name) for name in gateway.__all__)
    public = {name for name in vars(gateway) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(gateway, name)).__name__ == "module"}
    assert public - modules == set(gateway.__all__)
