"""``tool-gateway test``: contract tests of declared tools, with arguments drawn from their schemas and
results written as JUnit."""
