"""One frozen index per file, each with its own build()."""
