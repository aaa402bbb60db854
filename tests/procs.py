"""Linux ``/proc`` helpers for the tests that check worker processes exit with their parent."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> set[int]:
    """The child process ids of ``pid`` (empty once it is gone)."""
    out: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out.update(int(t) for t in (task / "children").read_text().split())
    except FileNotFoundError:
        pass
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
