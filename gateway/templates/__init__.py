"""The sandboxed, bounded Jinja templates that tools, prompts and HTTP bindings render: compiling, the sandbox,
the size and time limits, the filters templates may use, and the render budget. Imports nothing of the gateway
above ``errors``."""
