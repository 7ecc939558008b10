"""An example tool-gateway plugin: its tools are declared in ``tools/`` like a definitions directory."""
