"""Output files: checked before the work starts, written atomically, through symlinks.

Every file the project writes goes through :func:`atomic_write` (or :func:`atomic_target` for
writers that want a path, like ``onnx.save_model``): the data goes to a temporary file beside the
target, which is renamed over it, so a reader sees the old file or the new one, never half of
either, and a failed write removes its temporary file. A symlink is followed: its target is
replaced and the link stays a link. A path that exists and is not a regular file or directory (a
character device such as ``/dev/null``, a FIFO) is written directly, since renaming over it would
replace the device node. Directories are refused. A writer into a folder others can write (a
cache shared by a team) passes ``follow_links=False``: a planted link at a predictable name is
then replaced by the new file, never followed to overwrite what it points at (issue 44, item 5).

Commands call :func:`check_output` and :func:`check_output_dir` on every output path before they
start a long run, so a typo in ``-o`` costs a second, not the whole optimization.

Rejected: ``tempfile.NamedTemporaryFile`` (mode 0600 instead of the umask's mode, and a second
handle to the name), and a fixed ``.NAME.tmp`` name (two writers of one file would share it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from tensor_eqsat.errors import TensorEqsatError


class OutputError(TensorEqsatError):
    """An output path cannot be written: it names the path and the reason."""


def _is_special(path: Path) -> bool:
    """True when ``path`` exists (after symlinks) and is neither a regular file nor a directory."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_output(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Check that a file can be written at ``path`` before any work is done; return it as a Path.

    Raises OutputError naming the path when it is empty, is a directory or a read-only file, or
    its directory is missing, not a directory or not writable.

    >>> check_output("/no/such/dir/x.json")
    Traceback (most recent call last):
    ...
    tensor_eqsat.outputs.OutputError: output /no/such/dir/x.json: directory /no/such/dir does not exist
    """
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{what}: empty path")
    if p.is_dir():
        raise OutputError(f"{what} {p}: is a directory")
    if _is_special(p):
        if not os.access(p, os.W_OK):
            raise OutputError(f"{what} {p}: not writable")
        return p
    target = Path(os.path.realpath(p))
    parent = target.parent
    if not parent.exists():
        raise OutputError(f"{what} {p}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"{what} {p}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {p}: directory {parent} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputError(f"{what} {p}: file is read-only")
    return p


def check_output_dir(path: str | os.PathLike[str], what: str = "output directory") -> Path:
    """Check that ``path`` is, or can be created as, a writable directory; return it as a Path.

    Raises OutputError naming the path when it (or a parent) is a file, or the nearest existing
    parent is not writable.
    """
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{what}: empty path")
    if p.exists():
        if not p.is_dir():
            raise OutputError(f"{what} {p}: exists and is not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise OutputError(f"{what} {p}: not writable")
        return p
    parent = Path(os.path.realpath(p)).parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{what} {p}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {p}: directory {parent} is not writable")
    return p


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _removed_on_sigterm(tmp: Path) -> contextlib.AbstractContextManager[None]:
    """While the block runs, SIGTERM first removes ``tmp``, then takes its course (the previous
    handler, or the default: the process ends). A ``finally`` does not run when SIGTERM ends
    the process, so without this an interrupted write left its temporary file behind. Main
    thread only (Python runs signal handlers there); elsewhere, or where SIGTERM is ignored,
    nothing changes."""
    from tensor_eqsat.workers import before_sigterm

    def remove() -> None:
        with contextlib.suppress(OSError):
            os.unlink(tmp)

    return before_sigterm(remove)


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike[str], *, follow_links: bool = True) -> Iterator[Path]:
    """A temporary path to write; on success it replaces ``path``'s target, on failure it is removed.

    Yields ``path`` itself when it names a device or FIFO (written directly). The temporary file
    is in the target's directory (so the rename is atomic) and named ``.NAME.<random>.tmp``.
    follow_links: a symlink at ``path`` is followed (its target replaced, the link kept); False:
    the link itself is replaced by the new file and what it points at is left alone (no device
    or FIFO is written through a link either). Default True.
    Raises OutputError when the path is a directory or the write or rename fails.
    """
    p = Path(path)
    link = not follow_links and p.is_symlink()
    if not link and p.is_dir():
        raise OutputError(f"cannot write {p}: is a directory")
    if not link and _is_special(p):
        yield p
        return
    target = Path(os.path.realpath(p)) if follow_links else Path(os.path.realpath(p.parent)) / p.name
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        # O_EXCL: never reuse another writer's file (nor follow a link planted at its name);
        # mode 0666 & ~umask, as a plain open would.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {_reason(exc)}") from None
    os.close(fd)
    try:
        with _removed_on_sigterm(tmp):
            yield tmp
        with contextlib.suppress(OSError):
            # Keep an existing file's permissions, as rewriting it in place would.
            old = os.stat(target, follow_symlinks=follow_links)
            if stat.S_ISREG(old.st_mode):
                os.chmod(tmp, stat.S_IMODE(old.st_mode))
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {_reason(exc)}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(path: str | os.PathLike[str], data: str | bytes, *, follow_links: bool = True) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; see :func:`atomic_target`
    (``follow_links`` too).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     d = Path(tmp)
    ...     atomic_write(d / "a.txt", "hello\\n")
    ...     (d / "a.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('hello\\n', ['a.txt'])
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_target(path, follow_links=follow_links) as tmp:
        try:
            with open(tmp, "wb") as f:
                f.write(raw)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {_reason(exc)}") from None


COMPLETE = "complete.json"
"""The completion marker of a directory written by :func:`write_dir`: written last, it lists
every file of the set with its SHA-256. A directory without it holds an interrupted write."""


def write_dir(directory: str | os.PathLike[str], files: Mapping[str, str | bytes]) -> Path:
    """Write a set of files into ``directory`` so a failure never passes for a complete set.

    A new directory is filled under a temporary name beside it and renamed into place, so it
    appears complete or not at all. In an existing directory the marker :data:`COMPLETE` is
    removed first, every file is written atomically, and the marker is written last. Returns
    the directory; raises OutputError naming the path when it cannot be written.

    >>> import json, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     d = Path(tmp) / "run"
    ...     _ = write_dir(d, {"a.txt": "1\\n"})
    ...     sorted(p.name for p in d.iterdir()), list(json.loads((d / COMPLETE).read_text())["files"])
    (['a.txt', 'complete.json'], ['a.txt'])
    """
    import hashlib
    import json
    import shutil

    out = check_output_dir(directory)
    for name in files:
        if name == COMPLETE or Path(name).name != name:
            raise OutputError(f"{out}: {name!r} is not a plain file name of a run directory")
    raw = {k: v.encode("utf-8") if isinstance(v, str) else v for k, v in files.items()}
    marker = json.dumps({"files": {k: hashlib.sha256(v).hexdigest() for k, v in raw.items()}}, indent=2)
    if not out.exists():
        target = Path(os.path.realpath(out))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            tmp.mkdir()
        except OSError as exc:
            raise OutputError(f"cannot create {out}: {_reason(exc)}") from None
        try:
            for name, data in raw.items():
                (tmp / name).write_bytes(data)
            (tmp / COMPLETE).write_text(marker + "\n", encoding="utf-8")
            os.rename(tmp, target)
            return out
        except OSError as exc:
            if not target.is_dir():  # not a race with another writer creating it: a real failure
                raise OutputError(f"cannot write {out}: {_reason(exc)}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    try:
        (out / COMPLETE).unlink(missing_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write {out}: {_reason(exc)}") from None
    for name, data in raw.items():
        atomic_write(out / name, data)
    atomic_write(out / COMPLETE, marker + "\n")
    return out
