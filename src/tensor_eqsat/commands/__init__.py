"""CLI subcommands, one module each (see :mod:`tensor_eqsat.cli`)."""
