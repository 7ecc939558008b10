"""The running service: the typed holder of what a running gateway shares (``gateway``), the rebuild engine
(``rebuild``), reloads on file changes, the browser bridge, the cluster of replicas, and the start-up GC pause."""
