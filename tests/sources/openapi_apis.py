"""Two APIs written for the tests in the shape of real published ones, each with a small server implementing it.

- ``PETSTORE`` (OpenAPI 3.0, YAML): the classic pet store grown like real ones — path, query (array) and header
  parameters, an ``allOf`` body, a flat body with a ``nullable`` field, an operation without an operationId, a
  circular schema (a pet's ``family`` holds pets), an API key in a header, path-level parameters.
- ``TRACKER`` (OpenAPI 3.1, JSON): an issue tracker shaped like GitHub's — server variables, ``oneOf`` bodies,
  ``type: [string, "null"]``, a recursive search filter (``and``/``or`` of filters), HTTP basic auth, a
  ``$ref`` with a sibling description.

``Recorder`` is the server: every request it receives (method, path, query, headers, cookies as parsed, JSON
body) is kept, and it answers with the request echoed, so tests assert on what reached the upstream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PETSTORE = """
openapi: 3.0.3
info: {title: Swagger Petstore, version: 1.0.0}
servers:
  - url: "{base}/v1"
    variables:
      base: {default: "BASE"}
security:
  - api_key: []
paths:
  /pets:
    get:
      operationId: listPets
      summary: List all pets
      description: Returns the pets in the store, optionally filtered by tag.
      parameters:
        - {name: limit, in: query, description: How many items to return at one time (max 100),
           schema: {type: integer, format: int32, minimum: 1, maximum: 100}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: X-Request-Id, in: header, schema: {type: string}}
        - {name: Accept, in: header, schema: {type: string}}
      responses:
        "200": {description: ok}
    post:
      operationId: createPet
      summary: Create a pet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/NewPet"}
      responses:
        "201": {description: created}
  /pets/{petId}:
    parameters:
      - $ref: "#/components/parameters/PetId"
    get:
      operationId: showPetById
      summary: Info for a specific pet
      responses:
        "200": {description: ok}
    delete:
      summary: Delete a pet
      responses:
        "204": {description: deleted}
  /pets/{petId}/owner:
    put:
      operationId: updateOwner
      parameters:
        - $ref: "#/components/parameters/PetId"
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Owner"}
      responses:
        "200": {description: ok}
components:
  parameters:
    PetId: {name: petId, in: path, required: true, description: The id of the pet, schema: {type: string}}
  securitySchemes:
    api_key: {type: apiKey, in: header, name: X-API-Key}
  schemas:
    PetBase:
      type: object
      properties:
        name: {type: string}
        tag: {type: string, nullable: true}
        family:
          type: array
          items: {$ref: "#/components/schemas/Pet"}
    Pet:
      allOf:
        - $ref: "#/components/schemas/PetBase"
        - type: object
          properties:
            id: {type: integer, format: int64}
    NewPet:
      allOf:
        - $ref: "#/components/schemas/PetBase"
        - required: [name]
    Owner:
      type: object
      required: [name]
      properties:
        name: {type: string}
        email: {type: string, format: email, nullable: true, x-internal: true}
        age: {type: integer, minimum: 0, exclusiveMinimum: true}
"""

TRACKER: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Issue tracker", "version": "2026-01-01"},
    "servers": [{"url": "{scheme}://127.0.0.1:{port}/api/{version}",
                 "variables": {"scheme": {"default": "http"}, "port": {"default": "PORT"},
                               "version": {"default": "v3", "enum": ["v3"]}}}],
    "security": [{"basic": []}],
    "paths": {
        "/repos/{owner}/{repo}/issues": {
            "parameters": [{"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                           {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "issues/list-for-repo", "summary": "List repository issues",
                    "parameters": [
                        {"name": "state", "in": "query", "schema": {"enum": ["open", "closed", "all"],
                                                                    "default": "open"}},
                        {"name": "per_page", "in": "query", "schema": {"type": "integer", "maximum": 100}},
                        {"name": "owner", "in": "query", "description": "filter by the issue's owner",
                         "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "ok"}}},
            "post": {"operationId": "issues/create", "summary": "Create an issue",
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "oneOf": [{"$ref": "#/components/schemas/IssueByTitle"},
                                   {"$ref": "#/components/schemas/IssueFromTemplate"}]}}}},
                     "responses": {"201": {"description": "created"}}},
        },
        "/repos/{owner}/{repo}/issues/{issue_number}": {
            "patch": {"operationId": "issues/update", "summary": "Update an issue",
                      "parameters": [
                          {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                          {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                          {"name": "issue_number", "in": "path", "required": True, "schema": {"type": "integer"}}],
                      "requestBody": {"required": True, "content": {"application/json": {"schema": {
                          "type": "object",
                          "properties": {"title": {"type": ["string", "null"]},
                                         "state": {"enum": ["open", "closed"]},
                                         "labels": {"type": "array", "items": {"type": "string"}}}}}}},
                      "responses": {"200": {"description": "ok"}}},
        },
        "/search/issues": {
            "post": {"operationId": "search/issues", "summary": "Search issues with a filter tree",
                     "security": [],
                     "requestBody": {"content": {"application/json": {"schema": {
                         "type": "object", "required": ["filter"],
                         "properties": {"filter": {"$ref": "#/components/schemas/Filter",
                                                   "description": "what to match"}}}}}},
                     "responses": {"200": {"description": "ok"}}},
        },
    },
    "components": {
        "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        "schemas": {
            "IssueByTitle": {"type": "object", "required": ["title"],
                             "properties": {"title": {"type": "string"}, "body": {"type": ["string", "null"]}}},
            "IssueFromTemplate": {"type": "object", "required": ["template"],
                                  "properties": {"template": {"type": "string"}}},
            "Filter": {"type": "object", "properties": {
                "field": {"type": "string"}, "equals": {"type": "string"},
                "and": {"type": "array", "items": {"$ref": "#/components/schemas/Filter"}},
                "or": {"type": "array", "items": {"$ref": "#/components/schemas/Filter"}}}},
        },
    },
}


@dataclass
class Recorder:
    """The upstream: keeps every request and answers with it."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    # Every request's headers as received, in order and repeats kept (``requests`` keeps the last of a name).
    header_lists: list[list[tuple[str, str]]] = field(default_factory=list)

    async def handle(self, request: Request) -> JSONResponse:
        raw = await request.body()
        seen = {"method": request.method, "path": request.url.path, "query": [list(pair) for pair in request.query_params.multi_items()],
                "headers": {k.lower(): v for k, v in request.headers.items()}, "cookies": dict(request.cookies),
                "json": json.loads(raw) if raw else None}
        self.requests.append(seen)
        self.header_lists.append([(k.lower(), v) for k, v in request.headers.items()])
        return JSONResponse({"received": seen})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.handle,
                                       methods=["GET", "POST", "PUT", "PATCH", "DELETE"])])


def tracker_for(port: int) -> str:
    """The tracker document as JSON, its server variable's default pointing at ``port``."""
    return json.dumps(TRACKER).replace('"PORT"', f'"{port}"')
