"""Filters around a call: the chains declared in YAML, the built-in filters, and how a call runs through them."""
