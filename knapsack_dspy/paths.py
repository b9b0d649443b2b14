"""Where things live: the data directory and the project cache directory.

Resolution order, everywhere: an explicit argument (CLI flag) > environment variable > default.
"""

from __future__ import annotations

import os
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
