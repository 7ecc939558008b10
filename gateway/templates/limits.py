"""What one operation of a template may make, checked before it runs (``check_*``) and measured after
(``measured``); the sandbox (``gateway.templates.sandbox``) calls these where operations pass.

    MAX_SIZE         characters and members (counted through nested lists and mappings) of one value made
    MAX_INT_BITS     one integer
    MAX_SORTED       items one sort may take (its cost is n log n comparisons in one C call)
    MAX_SCANNED      characters one regular-expression filter (wordwrap, title, urlize) may scan in one call
    MAX_STRIP_CHARS  the ``chars`` of strip/trim (each character of the text is looked up in them)

Each check estimates the size of the result from the operands (``'x' * n`` makes ``n`` characters) and raises
``TemplateTooCostly`` when it is over the limit, so that the costly C call never starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .budget import TemplateTooCostly, current

MAX_SIZE = 1_000_000
MAX_INT_BITS = 16_384  # ~4,900 decimal digits, a little over what Python will print (4,300)
MAX_SORTED = 10_000  # ~10 ms of sorting, which holds the GIL throughout
MAX_SCANNED = 50_000  # a few ms of one regular expression over the text, which holds the GIL throughout
MAX_STRIP_CHARS = 256
MAX_FORMAT_DIGITS = 7  # a width or precision of 8 digits or more is over MAX_SIZE anyway
_SEQUENCES = (str, bytes, list, tuple)
_PERCENT_SPEC = re.compile(rb"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.DOTALL)


def too_large(what: str, size: float, limit: int = MAX_SIZE) -> TemplateTooCostly:
    return TemplateTooCostly(f"{what} would make a value of {_amount(size)} characters and members, more than a "
                             f"template may make ({limit:,})")


def _amount(size: float) -> str:
    return f"{size:,.0f}" if size < 1e18 else f"about {size:.1e}"


def size(value: Any, limit: int = MAX_SIZE) -> int:
    """Characters and members in ``value``, counted through lists, tuples and mappings; stops soon after
    ``limit`` (then the count is only known to be larger)."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += len(item)
            stack.extend(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            total += 1
    return total


def measured(value: Any, what: str) -> Any:
    """``value``, made by a template operation, after checking and spending its size."""
    budget = current()
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise TemplateTooCostly(f"{what} made an integer of {value.bit_length():,} bits, more than a template "
                                    f"may make ({MAX_INT_BITS:,})")
        return value
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        made = size(value)
        if made > MAX_SIZE:
            raise too_large(what, made)
        budget.spend(made)
    return value


# ---------------------------------------------------------------- estimates, before an operation runs


def check(what: str, estimate: float) -> None:
    if estimate > MAX_SIZE:
        raise too_large(what, estimate)


def check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        bits = exponent * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise TemplateTooCostly(f"{base} ** {exponent} would make an integer of {_amount(bits)} bits, more "
                                    f"than a template may make ({MAX_INT_BITS:,})")


def check_product(left: Any, right: Any) -> None:
    if isinstance(left, int) and isinstance(right, _SEQUENCES):
        left, right = right, left
    if isinstance(left, _SEQUENCES) and isinstance(right, int):
        check(f"repeating a {type(left).__name__} {right} times", size(left) * max(right, 0))
    elif isinstance(left, int) and isinstance(right, int):
        bits = left.bit_length() + right.bit_length()
        if bits > MAX_INT_BITS + 1:
            raise TemplateTooCostly(f"a product of {bits:,} bits is more than a template may make "
                                    f"({MAX_INT_BITS:,})")


def check_addition(left: Any, right: Any) -> None:
    if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        check("adding these", size(left) + size(right))


def check_percent(template: Any, values: Any) -> None:
    """``template % values``: widths and precisions, and every value once per conversion, must fit."""
    raw = template.encode("utf-8", "surrogatepass") if isinstance(template, str) else template
    conversions, widths = 0, 0
    for match in _PERCENT_SPEC.finditer(raw):
        if match[3] == b"%":
            continue
        width, precision = match[1] or b"", match[2] or b""
        if b"*" in (width, precision):
            raise TemplateTooCostly("'*' widths in %-formatting are not allowed in templates: write the width")
        if max(len(width), len(precision)) > MAX_FORMAT_DIGITS:
            raise too_large("this %-format width", 10 ** max(len(width), len(precision)))
        conversions += 1
        widths += max(int(width or 0), int(precision or 0))
    if isinstance(values, Mapping):
        items: Iterable[Any] = values.values()
    else:
        items = values if isinstance(values, tuple) else (values,)
    # %r and %a may escape every character (up to 10 each); a number may print ~310 digits.
    longest = max((10 * size(item) + 320 for item in items), default=0)
    check("this %-formatting", len(template) + widths + conversions * longest)


def check_format_spec(spec: str) -> None:
    for digits in re.findall(r"\d+", spec):
        if len(digits) > MAX_FORMAT_DIGITS or int(digits) > MAX_SIZE:
            raise too_large(f"the format spec {spec!r}", int(digits) if len(digits) < 30 else 10 ** len(digits))


def check_join(separator: Any, items: list[Any]) -> None:
    parts = sum(len(item) if isinstance(item, (str, bytes)) else size(item) for item in items)
    check("this join", parts + size(separator) * max(len(items) - 1, 0))


def check_replace(text: Any, old: Any, new: Any, count: Any = -1) -> None:
    text = text if isinstance(text, (str, bytes)) else str(text)
    old = old if isinstance(old, type(text)) else str(old)
    new = new if isinstance(new, type(text)) else str(new)
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    check("this replace", len(text) + found * max(len(new) - len(old), 0))


def check_width(what: str, width: Any) -> None:
    if isinstance(width, int):
        check(what, width)


def check_strip_chars(chars: Any) -> None:
    if isinstance(chars, (str, bytes)) and len(chars) > MAX_STRIP_CHARS:
        raise TemplateTooCostly(f"strip/trim characters: at most {MAX_STRIP_CHARS} in a template, got "
                                f"{len(chars):,}")


def check_sortable(items: Any) -> None:
    if isinstance(items, (list, tuple, dict, set, frozenset)) and len(items) > MAX_SORTED:
        raise TemplateTooCostly(f"sorting {len(items):,} items: at most {MAX_SORTED:,} in a template")


def check_scanned(what: str, text: str) -> None:
    if len(text) > MAX_SCANNED:
        raise TemplateTooCostly(f"{what} of {len(text):,} characters: at most {MAX_SCANNED:,} in a template")


def check_sum_start(start: Any) -> None:
    # sum(lists, start=[]) copies the growing list at every step: quadratic, in one C call.
    if not isinstance(start, (int, float)):
        raise TemplateTooCostly("sum: only numbers can be summed in a template (start must be a number)")


class CappedText:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0

    def write(self, text: str) -> None:
        self.length += len(text)
        if self.length > MAX_SIZE:
            raise too_large("pprint", self.length)
        self.parts.append(text)
