"""The LangChain4j example: a model guesses square roots; a tool computes them."""

import math
from typing import Annotated


def square_root(x: Annotated[float, "The number to take the square root of; not negative."]) -> float:
    if x < 0:
        from gateway import ToolError

        raise ToolError(f"Cannot take the square root of a negative number ({x}).")
    return math.sqrt(x)


def add(a: Annotated[float, "First addend."], b: Annotated[float, "Second addend."]) -> float:
    return a + b
