"""Where things live: the data directory and the project cache directory; how a results file names a path.

Resolution order, everywhere: an explicit argument (CLI flag) > environment variable > default.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from knapsack_dspy.errors import KnapsackDspyError

DATA_DIR_ENV = "KDSPY_DATA_DIR"
CACHE_DIR_ENV = "KDSPY_CACHE_DIR"


class ConfigError(KnapsackDspyError, ValueError):
    """A setting is missing or points somewhere unusable."""


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The benchmark data directory (holding ``tatqa/``, ``finqa/``, ``sara/``).

    ``explicit`` > ``$KDSPY_DATA_DIR`` > ``../shared/data`` next to the current directory.
    """
    candidates = []
    if explicit:
        candidates.append(("argument", Path(explicit)))
    elif os.environ.get(DATA_DIR_ENV):
        candidates.append((f"${DATA_DIR_ENV}", Path(os.environ[DATA_DIR_ENV])))
    else:
        candidates.append(("default", Path.cwd().parent / "shared" / "data"))
    source, path = candidates[0]
    path = path.expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"data directory {str(path)!r} (from {source}) does not exist; "
            f"pass --data-dir or set {DATA_DIR_ENV} to the folder holding the data sets' folders"
        )
    return path.resolve()


def cache_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The project cache directory (LM cache, embedding cache, joined model weights).

    ``explicit`` > ``$KDSPY_CACHE_DIR`` > ``$XDG_CACHE_HOME/knapsack-dspy`` (``~/.cache/knapsack-dspy``).
    Created on first use.
    """
    if explicit:
        path = Path(explicit)
    elif os.environ.get(CACHE_DIR_ENV):
        path = Path(os.environ[CACHE_DIR_ENV])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        path = base / "knapsack-dspy"
    path = path.expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def portable_path(path: str | os.PathLike) -> str:
    """``path`` as a file meant to be committed records it, with no path of this machine in it: a relative path as
    given; an absolute one relative to the current directory when inside it (a suite named from the checkout's
    root: ``benchmarks/x.toml``), else as ``$KDSPY_DATA_DIR/<relative>`` inside the data directory that variable
    names, else the file's name alone."""
    given = Path(os.fspath(path)).expanduser()
    if not given.is_absolute():
        return os.fspath(path)
    resolved = given.resolve()
    inside = _relative_to(resolved, Path.cwd().resolve())
    if inside is not None:
        return inside
    data = os.environ.get(DATA_DIR_ENV, "").strip()
    if data:
        inside = _relative_to(resolved, Path(data).expanduser().resolve())
        if inside is not None:
            return f"${DATA_DIR_ENV}/{inside}"
    return resolved.name


#: a traceback's ``File "<path>"`` (``traceback.format_exc``)
_TRACEBACK_FILE = re.compile(r'(File ")([^"\n]+)(")')
#: where an installed package's files are; this package's own, wherever its checkout or export lies
_PACKAGE_ROOTS = ("site-packages", "dist-packages", "knapsack_dspy")


def portable_traceback(text: str) -> str:
    """A traceback with every ``File "<path>"`` a committed results row can keep (no path of this machine): from
    the last ``site-packages`` / ``dist-packages`` / ``knapsack_dspy`` folder on
    (``site-packages/dspy/clients/lm.py``, ``knapsack_dspy/bench/...``), relative to the Python installation
    (``lib/python3.11/...``), else as :func:`portable_path` names it. Names that are not absolute paths
    (``<string>``) stay as they are."""
    return _TRACEBACK_FILE.sub(lambda m: m.group(1) + _source_file(m.group(2)) + m.group(3), text)


def _source_file(name: str) -> str:
    if not os.path.isabs(name):
        return name
    parts = Path(name).parts
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] in _PACKAGE_ROOTS:
            return Path(*parts[index:]).as_posix()
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        inside = _relative_to(Path(name), Path(prefix))
        if inside is not None:
            return inside
    return portable_path(name)


def _relative_to(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None
