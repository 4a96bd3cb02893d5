"""CLI subcommands, one module per area."""
