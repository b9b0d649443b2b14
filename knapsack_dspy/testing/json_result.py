"""How the measurement scripts hand over a result: indented JSON on standard output, and in ``--json`` if given."""

from __future__ import annotations

import json
from pathlib import Path


def print_and_save(result, path: str | None = None, saved=None) -> None:
    """Print ``result`` as indented JSON; write ``saved`` (default: the same) to ``path`` when one is given."""
    print(json.dumps(result, indent=2))
    if path:
        Path(path).write_text(json.dumps(result if saved is None else saved, indent=2))
