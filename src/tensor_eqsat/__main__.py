"""``python -m tensor_eqsat`` runs the CLI."""

from tensor_eqsat.cli import run

run()
