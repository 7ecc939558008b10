"""JSON Schemas: the published ones that definitions are checked against, the fast argument checker and the
schema compiler behind it, argument errors with their JSON paths, pointers, ``$ref`` cycles, and the schemas
derived from a Python signature and its docstring."""
