"""RFC 6570 level-1 URI templates (``test://template/{id}/data``), matched against the URIs clients read.

Level 1 is simple string expansion: a variable's value is percent-encoded, so it holds only unreserved
characters (letters, digits, ``-._~``) and ``%XX``. A variable must be followed by the end or by a reserved
character (``/``, ``?``, ``:``, …): each one's match then ends where that character is, and matching a URI costs
one pass, never backtracking (``{a}-{b}`` could be split many ways: it is refused when the catalog is built).
Nothing beyond level 1 (``{+x}``, ``{x*}``, ``{?x}``) is a resource template here either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VALUE = r"[A-Za-z0-9\-._~%]"  # what a level-1 expansion is made of
_VALUE_CHAR = re.compile(_VALUE)
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A read's URI is matched against every template: a longer one is refused before any pattern runs.
MAX_URI_CHARS = 4096


class UriTemplateInvalid(ValueError):
    pass


@dataclass(frozen=True)
class UriTemplate:
    source: str
    variables: tuple[str, ...]
    pattern: re.Pattern[str]

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables' values in ``uri`` (decoded), or None when it is not one of this template's URIs."""
        if len(uri) > MAX_URI_CHARS:
            return None
        found = self.pattern.fullmatch(uri)
        return {name: unquote(value) for name, value in found.groupdict().items()} if found else None


def is_uri_template(uri: str) -> bool:
    return "{" in uri or "}" in uri


def parse_uri_template(uri: str) -> UriTemplate:
    """The template ``uri``; raises ``UriTemplateInvalid`` saying what is wrong with it."""
    parts: list[str] = []
    variables: list[str] = []
    end = 0
    for expression in _EXPRESSION.finditer(uri):
        name = expression.group(1)
        if not _VARIABLE.match(name):
            raise UriTemplateInvalid(f"{{{name}}} is not a level-1 variable (a name of letters, digits and '_'; "
                                     "operators such as + # ? * are not supported)")
        if name in variables:
            raise UriTemplateInvalid(f"variable {{{name}}} appears twice")
        literal = uri[end:expression.start()]
        if "{" in literal or "}" in literal:
            raise UriTemplateInvalid("unbalanced '{' or '}'")
        if variables and (not literal or _VALUE_CHAR.match(literal[0])):
            raise UriTemplateInvalid(f"{{{variables[-1]}}} must be followed by the end or a reserved character "
                                     f"such as '/' (where would its value end in {uri[:80]!r}?)")
        parts += [re.escape(literal), f"(?P<{name}>{_VALUE}+)"]
        variables.append(name)
        end = expression.end()
    rest = uri[end:]
    if "{" in rest or "}" in rest:
        raise UriTemplateInvalid("unbalanced '{' or '}'")
    if variables and rest and _VALUE_CHAR.match(rest[0]):
        raise UriTemplateInvalid(f"{{{variables[-1]}}} must be followed by the end or a reserved character "
                                 f"such as '/' (where would its value end in {uri[:80]!r}?)")
    parts.append(re.escape(rest))
    return UriTemplate(uri, tuple(variables), re.compile("".join(parts)))
