"""The ``tool-gateway`` command: its sub-commands (``main``) and the ``status`` report."""
