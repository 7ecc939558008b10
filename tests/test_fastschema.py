"""The compiled definitions check (gateway.schema.fastschema) never disagrees with jsonschema when it gives a verdict."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import yaml

from gateway.definitions.load import load_definitions
from gateway.schema.published import definitions_check, definitions_validator

REPO = Path(__file__).resolve().parent.parent
# Values a mutation puts anywhere: each type, the integer/float boundary, strings a pattern or enum may refuse.
ODD_VALUES = [None, True, False, 0, 1, 1.0, 1.5, -3, "", "x", "Not An Id!", "server", [], [1, 1], ["a", "a"],
              {}, {"python": "m:f"}, {"unknown": 1}, {"http": {"url": "http://x", "json": 1, "form": {}}}]


def _documents() -> list[dict]:
    found = []
    for path in sorted([*REPO.glob("tool-definitions/**/*.yaml"), *REPO.glob("tests/fixtures/**/*.yaml")]):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and "openapi" not in data:
            found.append(data)
    return found


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _mutate(document: dict, rng: random.Random) -> dict:
    mutated = copy.deepcopy(document)
    path = rng.choice(_paths(mutated)[1:])
    parent = mutated
    for step in path[:-1]:
        parent = parent[step]
    action = rng.random()
    if action < 0.3 and isinstance(parent, dict):
        del parent[path[-1]]
    elif action < 0.45 and isinstance(parent, dict):
        parent[rng.choice(["extra", "id", "binding", "scope", "tags", "rate_limit"])] = rng.choice(ODD_VALUES)
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
    return mutated


def test_verdicts_agree_with_jsonschema_on_mutated_documents():
    """Over thousands of mutated definitions files, every True or False the compiled check gives is jsonschema's."""
    check, validator = definitions_check(), definitions_validator()
    rng = random.Random(16)
    documents = _documents()
    assert documents
    decided = 0
    for _ in range(3000):
        document = _mutate(rng.choice(documents), rng)
        verdict = check(document)
        if verdict is not None:
            decided += 1
            assert verdict == validator.is_valid(document), document
    assert decided > 2000  # the check decides the common cases, or it would not pay


def test_shipped_examples_are_decided_valid():
    """The shipped definitions files are certainly valid to the compiled check (jsonschema is not needed)."""
    check = definitions_check()
    for document in _documents():
        if definitions_validator().is_valid(document):
            assert check(document) is True


def test_an_invalid_file_still_gets_jsonschemas_worded_problem(tmp_path):
    """A file the compiled check refuses is still reported with the schema check's message and position."""
    (tmp_path / "bad.yaml").write_text("tools:\n  - id: t\n    binding: {python: 'm:f'}\n    scope: nowhere\n")
    problems = load_definitions(tmp_path).problems
    assert any("scope" in p.message and p.line == 4 for p in problems), problems
