"""Bad files of up to 200 MB through the readers and scorers: one line, exit 2, and the peak memory of each.

Each bad file is written to a temporary folder, given to a ``kdspy`` command in a child process, and the
child's peak resident memory is read from ``os.wait4`` (``ru_maxrss``). The files: gzip bombs (one whose
trailer states its 2 GiB, one whose trailer lies), a plain file over the size limit, 200 MB of ``[``, a
200 MB array whose last record nests 100,000 levels deep,
100 million JSON values, 8 million strings (just under the value limit: the costliest file that is parsed at
all), TAT-QA contexts up to the value limit (~150 MB) whose last question is bad (an unknown answer type; a
5,000-digit integer),
200 MB that is not UTF-8 at its end, an unterminated 200 MB string, a 200 MB string where a record should be,
and a ~200 MB prediction file naming a question twice. Prints one row per (file, command)::

    file                          command          exit  lines  peak MB  seconds  message
    gzip_bomb_2gib                score tatqa gold    2      1      ...

Run: ``python benchmarks/bad_files.py`` (needs ~1 GB of free disk in the temporary folder; ``--json``
prints the rows as JSON; ``--size-mb`` scales the 200 MB files).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KDSPY_DATA_DIR", ROOT.parent / "shared" / "data"))
_CHUNK = 16 * 1024 * 1024


def _gzip_zeros(path: Path, gigabytes: float, tail_member: bool = False) -> None:
    """A gzip file of ``gigabytes`` GiB of spaces (a few MB); ``tail_member``: plus a tiny last member, so the
    trailer states a size of 2 bytes (a lying bomb)."""
    block = b" " * _CHUNK
    with open(path, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as out:
            out.write(b"[")
            for _ in range(int(gigabytes * 1024**3 / _CHUNK)):
                out.write(block)
        if tail_member:
            raw.write(gzip.compress(b"]\n"))


def _tatqa_contexts(size_mb: float, last_question: dict) -> bytes:
    """TAT-QA dev contexts repeated (fresh uids) to about ``size_mb`` MB, or to just under the value limit
    when that comes first (compact TAT-QA JSON holds ~50,000 values per MB); the last question updated."""
    from knapsack_dspy.file_limits import _structure, max_values

    with gzip.open(DATA / "tatqa" / "dev.json.gz") as fh:
        base = json.loads(fh.read())
    text = json.dumps(base).encode()
    structure = _structure(text)
    values = len(structure) - structure.count(b"]") - structure.count(b"}")
    copies = max(1, min(int(size_mb * 1e6 * 0.97 / len(text)), int(0.97 * max_values() / values)))
    contexts = []
    for copy in range(copies):
        for context in base:
            context = json.loads(json.dumps(context))
            context["table"]["uid"] += f"-{copy}"
            for question in context["questions"]:
                question["uid"] += f"-{copy}"
            contexts.append(context)
    contexts[-1]["questions"][-1].update(last_question)
    return json.dumps(contexts).replace('"__LONG__"', "7" * 5000).encode()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _cases(size_mb: float):
    """(name, writer(folder) -> path, sides) for every bad file; sides: where the file goes."""
    n = int(size_mb * 1e6 * 0.995)  # a little under the limit (200 MB = 200,000,000 bytes)
    yield (
        "gzip_bomb_2gib",
        lambda d: _gzip_zeros(d / "bomb.json.gz", 2.0) or d / "bomb.json.gz",
        ("gold", "pool"),
    )
    yield (
        "lying_gzip_bomb_1gib",
        lambda d: _gzip_zeros(d / "lying.json.gz", 1.0, tail_member=True) or d / "lying.json.gz",
        ("gold", "pool"),
    )
    yield "larger_than_limit", lambda d: _write(d / "big.json", b" " * (n + n // 4)), ("gold",)
    yield "deep_nesting", lambda d: _write(d / "deep.json", b"[" * n), ("gold", "pool", "predictions")
    record = b'{"a": "' + b"x" * 200 + b'"}, '
    yield (
        "deep_record",
        lambda d: _write(
            d / "deep_record.json",
            b"[" + record * ((n - 200_002) // len(record)) + b"[" * 100_000 + b"]" * 100_000 + b"]",
        ),
        ("gold", "pool"),
    )
    yield "many_values", lambda d: _write(d / "values.json", b"[" + b"1," * (n // 2 - 1) + b"1]"), ("gold",)
    yield (
        "strings_under_value_limit",
        lambda d: _write(d / "strings.json", b'["a"' + b',"a"' * 7_999_000 + b"]"),
        ("gold", "pool"),
    )
    yield (
        "tatqa_bad_answer_type",
        lambda d: _write(d / "types.json", _tatqa_contexts(size_mb, {"answer_type": "ratio"})),
        ("gold", "pool"),
    )
    yield (
        "tatqa_long_integer",
        lambda d: _write(
            d / "long.json",
            _tatqa_contexts(size_mb, {"answer_type": "arithmetic", "answer": "__LONG__", "scale": ""}),
        ),
        ("gold", "pool"),
    )
    yield "not_utf8_at_end", lambda d: _write(d / "latin.json", b'["' + b"x" * (n - 4) + b'\xff"]'), ("gold",)
    yield "unterminated_string", lambda d: _write(d / "open.json", b'{"a": "' + b"x" * (n - 8)), ("gold",)
    yield (
        "string_for_a_record",
        lambda d: _write(d / "string.json", b'["' + b"x" * (n - 4) + b'"]'),
        ("gold",),
    )
    yield (
        "predictions_key_twice",
        lambda d: _write(
            d / "dup.json",
            b"{"
            + b", ".join(b'"q%d": ["%s", ""]' % (i, b"x" * 190) for i in range(n // 210))
            + b', "q0": ["x", ""]}',
        ),
        ("predictions",),
    )


def _command(side: str, path: Path, folder: Path) -> list[str]:
    gold = folder / "gold_ok.json"
    predictions = folder / "pred_ok.json"
    if side == "gold":
        return ["score", "tatqa", "--gold", str(path), "--predictions", str(predictions)]
    if side == "predictions":
        return ["score", "tatqa", "--gold", str(gold), "--predictions", str(path)]
    return [
        "compile",
        "--dataset",
        "tatqa",
        "--pool",
        str(path),
        "--val",
        str(gold),
        "-o",
        str(folder / "p.json"),
        "--quiet",
    ]


# A small process starts the command and reads its peak memory (``os.wait4``): a child forked from this
# script, which holds the generated files' data, would count this script's memory as its own (Linux keeps the
# high-water mark across exec).
_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen([sys.executable, "-m", "knapsack_dspy.cli.main", *sys.argv[1:]],
                        stdout=subprocess.DEVNULL, stderr=sys.stderr)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _run(argv: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv], capture_output=True, text=True, env=env, check=False
    )
    code, peak_kb = (int(x) for x in done.stdout.split())
    lines = done.stderr.strip().splitlines()
    return {
        "exit": code,
        "lines": len(lines),
        "peak_mb": round(peak_kb / 1024, 1),
        "seconds": round(time.perf_counter() - started, 1),
        "message": lines[0][:160] if lines else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=200.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="bad_files_") as tmp:
        folder = Path(tmp)
        with gzip.open(DATA / "tatqa" / "dev_tune.json.gz") as fh:
            (folder / "gold_ok.json").write_bytes(fh.read())
        (folder / "pred_ok.json").write_text("{}")
        baseline = _run(
            [
                "score",
                "tatqa",
                "--gold",
                str(folder / "gold_ok.json"),
                "--predictions",
                str(folder / "pred_ok.json"),
            ]
        )
        rows.append(
            {
                "file": "(a good gold file, for the baseline)",
                "command": "score tatqa",
                "size_mb": None,
                **baseline,
            }
        )
        for name, writer, sides in _cases(args.size_mb):
            if wanted and name not in wanted:
                continue
            path = writer(folder)
            size = round(path.stat().st_size / 1e6, 1)
            for side in sides:
                result = _run(_command(side, path, folder))
                rows.append(
                    {
                        "file": name,
                        "command": {
                            "gold": "score tatqa --gold",
                            "predictions": "score tatqa --predictions",
                            "pool": "compile --pool",
                        }[side],
                        "size_mb": size,
                        **result,
                    }
                )
                if not args.json:
                    row = rows[-1]
                    print(
                        f"{row['file']:28} {row['command']:27} exit {row['exit']}  lines {row['lines']}  "
                        f"peak {row['peak_mb']:7.1f} MB  {row['seconds']:5.1f} s  {row['message']}",
                        flush=True,
                    )
            path.unlink()
    if args.json:
        print(json.dumps(rows, indent=2))
    bad = [row for row in rows[1:] if row["exit"] != 2 or row["lines"] != 1 or row["peak_mb"] > 1024]
    print(
        f"{len(rows) - 1} bad-file runs: {len(bad)} not one line / exit 2 / under 1 GB; baseline peak "
        f"{rows[0]['peak_mb']} MB; largest peak {max(row['peak_mb'] for row in rows[1:]):.1f} MB",
        file=sys.stderr,
    )
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
