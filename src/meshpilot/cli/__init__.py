"""Command line: one module per command group; each parses, calls one library function, prints."""
