"""What the CLI tests share: the exit code of one invocation."""

from __future__ import annotations

from tensor_eqsat.cli import main


def exit_code(argv: list[str]) -> int:
    """The exit code of one CLI invocation, whether the parser or the command ended it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
