"""Python functions behind the console tests' tools."""

from typing import Annotated


def place_order(**order: object) -> dict:
    return {"order": order, "summary": f"{order.get('quantity', 1)} {order['size']} for {order['customer']}"}


def track_order(number: int) -> str:
    from gateway import ToolError

    if number > 1000:
        raise ToolError(f"No order {number}.")
    return f"Order {number} is in the oven."


def greet(name: Annotated[str, "Who to greet."]) -> str:
    return f"Hello, {name}!"
