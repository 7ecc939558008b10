"""The catalog: what the gateway serves at one moment. ``snapshot`` holds the immutable types (``Tool``,
``Catalog``) that serving surfaces and formats read; ``build`` turns definitions, sources and filters into a
snapshot, with the per-file builds, the build cache (in memory and on disk), drafts, hidden arguments, examples,
prompts and resources."""
