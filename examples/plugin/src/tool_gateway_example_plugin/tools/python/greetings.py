"""The example plugin's functions; its tools name them as ``greetings:<function>``."""

from __future__ import annotations


def greet(name: str) -> str:
    """Greet someone.

    Args:
        name: who to greet.
    """
    return f"Hello, {name}!"


def shout(text: str) -> str:
    """Repeat a text in capitals.

    Args:
        text: what to repeat.
    """
    return text.upper()
