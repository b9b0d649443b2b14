"""No path of one machine in the repository (issue 48): every tracked text file -- code, docs, suites, committed
results, gzipped rows included -- names files relative to the checkout, the data directory (``$KDSPY_DATA_DIR/...``)
or the user's home (``~/...``), never by an absolute path that exists on one machine only.

The rule (:data:`MACHINE_PATH`): an absolute path whose first folder is one of :data:`MACHINE_ROOTS` -- a project
folder at the root (``work``), a temporary or scratch folder (``tmp``, ``var/tmp``, ``var/folders``, ``private``,
``scratch``), a home (``root``, ``home``, ``Users``, and a Windows drive's ``Users``) or a mount (``mnt``,
``media``) -- followed by a name (the cases below are written in pieces, so this file holds none). It
starts a path: the character before it is not part of a word, a relative path, a variable or a URL (a folder of
that name under ``.``, under another folder, under ``$HOME`` or ``${TMPDIR}``, or in a URL is not an absolute path
of a machine: the cases below).
System paths the same everywhere are allowed: ``/usr/bin/chromium``, ``/dev/null``, ``/proc/<pid>/fd/``,
``/etc/...``, ``/sys/...``, ``/opt/...``. A command that needs a scratch folder names a relative one (``--out
scratch``, ``../base``) or ``tempfile.gettempdir()``; results rows record tracebacks from the ``site-packages`` or
``knapsack_dspy`` folder on and suite files relative to where the bench ran (``paths.portable_traceback``,
``paths.portable_path``).
"""

from __future__ import annotations

import gzip
import lzma
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the first folder of an absolute path that exists on one machine only
MACHINE_ROOTS = ("work", "tmp", "var/tmp", "var/folders", "private", "scratch", "root", "home", "Users", "mnt",
                 "media")
MACHINE_PATH = re.compile(
    r"(?<![\w.~$}/\\])/(?:" + "|".join(map(re.escape, MACHINE_ROOTS)) + r")/(?=[\w.$-])"
    r"|\b[A-Za-z]:[\\/]+Users[\\/]")



#: what every match contains: a plain search for them skips most of the ~100 MB of text (rows) in a moment
_NEEDLES = (*(f"/{root}/" for root in MACHINE_ROOTS), "Users")


def machine_paths(text: str) -> list[str]:
    """``line: excerpt`` of every machine path in ``text``."""
    if not any(needle in text for needle in _NEEDLES):
        return []
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if any(needle in line for needle in _NEEDLES):
            found += [f"{number}: ...{line[max(0, m.start() - 30):m.end() + 30]}..."
                      for m in MACHINE_PATH.finditer(line)]
    return found


def _text(path: Path) -> str | None:
    """The file's text (a ``.gz`` / ``.xz`` file's decompressed), or None for a binary file (NUL bytes, not
    UTF-8)."""
    data = path.read_bytes()
    decompress = {".gz": gzip.decompress, ".xz": lzma.decompress}.get(path.suffix)
    if decompress is not None:
        try:
            data = decompress(data)
        except (OSError, EOFError, lzma.LZMAError):
            return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _tracked_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an export): the tracked files are unknown")
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name]


def test_no_tracked_text_file_names_a_path_of_one_machine():
    found = []
    for name in _tracked_files():
        path = ROOT / name
        text = _text(path) if path.is_file() else None
        if text is None:
            continue
        hits = machine_paths(text)
        found += [f"{name}:{hit}" for hit in hits]
    assert found == []


def _p(*parts: str) -> str:
    """A path written in pieces, so that this file holds none of the paths it checks."""
    return "/".join(parts)


@pytest.mark.parametrize("text", [
    _p("", "work", "main", "x.py"),
    _p("", "tmp", "kdspy-ask.json"),
    _p("", "var", "tmp", "x"),
    _p("", "root", ".cache", "x"),
    _p("", "home", "alice", "data"),
    _p("", "Users", "alice", "x.gguf"),
    _p("", "mnt", "disk", "x"),
    "C:" + "\\" + "Users\\alice\\x.gguf",
    "--out " + _p("", "tmp", "x"),
    "tar -x -C " + _p("", "tmp", "base"),
    'File \\"' + _p("", "work", "main", ".venv", "lib", "dspy.py") + '\\"',
    "${PINNED_ROOT:-" + _p("", "work", "pinned") + "}",
    "`" + _p("", "tmp", "pinned") + "`",
    "open('" + _p("", "work", "shared", "data") + "')",
])
def test_the_rule_finds_a_path_of_one_machine(text):
    assert len(machine_paths(text)) == 1


@pytest.mark.parametrize("text", [
    "/usr/bin/chromium", "/dev/null", "/proc/1234/fd/3", "/etc/os-release", "/opt/conda/bin/python",
    "/sys/fs/cgroup/cpu.max",
    "https://example.com" + _p("", "home", "docs"), "file " + _p(".", "tmp", "x"), _p("results", "tmp", "x"),
    "$HOME" + _p("", "work", "x"), "${TMPDIR}" + _p("", "x"), "~" + _p("", "models", "x.gguf"),
    _p("..", "shared", "data"), "$KDSPY_DATA_DIR" + _p("", "tatqa"),
    "`" + _p("", "tmp") + "`-script", _p("", "tmp") + " and " + _p("", "work"),
    "a/b/c/d", "50/50",
])
def test_the_rule_leaves_system_relative_and_url_paths_alone(text):
    assert machine_paths(text) == []
