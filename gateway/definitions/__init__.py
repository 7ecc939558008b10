"""What admins declare, read and checked: YAML files (with their ``file:line:col``), the tool, prompt and
resource models, the checks that make a definition servable, tool ids, paths and digests. Imports only
``errors``, ``settings`` and ``schema``: nothing here runs a tool."""
