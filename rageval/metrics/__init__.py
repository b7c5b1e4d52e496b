"""Per-case metric and check functions. Nothing in this package does I/O."""
