"""What a second ``kdspy ask`` question costs beyond its LM time (issue 13's target: <= the LM time + 1 s).

Starts one ``kdspy ask PROGRAM --interactive --json --no-cache`` process, writes the first ``--questions``
TAT-QA dev_tune questions to its standard input (one JSON object each: question, table, paragraphs) and times
each answer line as it arrives. Reports the start-up (from starting the process to the first answer, less that
answer's own time) and per question: the wall time between answers, the process's own ``seconds`` and
``lm_seconds``, and the overhead (wall time - LM seconds).

    kdspy compile --dataset tatqa --pipeline pot --selector seer --budget 2048 -M 4 \\
        --lm local/qwen2.5-coder-1.5b-instruct -o kdspy-ask.json
    python experiments/throughput/ask_latency.py --program kdspy-ask.json [--questions 3] [--json ask.json]

LM time: the questions' LM calls (1.5B: ~0.5-1 min each on 2 idle cores) plus loading the model once.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import knapsack_dspy  # noqa: F401  # isort: skip  (environment defaults first)
from knapsack_dspy.bench.programs.run_program import load_split
from knapsack_dspy.testing.json_result import print_and_save
from knapsack_dspy.testing.prompt_capture import BASE_SPEC

MODEL = BASE_SPEC.model


def question_lines(count: int, data_dir=None) -> list[str]:
    """The first ``count`` dev_tune questions as ``kdspy ask --interactive`` input lines."""
    examples = list(load_split(BASE_SPEC, "eval", data_dir))[:count]
    return [json.dumps({k: ex.get(k) for k in ("question", "table", "paragraphs")}) + "\n" for ex in examples]


def timed_answers(program: str, lines: list[str], model: str, data_dir=None) -> dict:
    """Run one interactive ``kdspy ask`` over ``lines``; the arrival time of each answer."""
    command = [sys.executable, "-m", "knapsack_dspy.cli.main", "ask", program, "--interactive", "--json",
               "--no-cache", "--lm", model]
    if data_dir:
        command += ["--data-dir", data_dir]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parents[2])
    process.stdin.write("".join(lines))
    process.stdin.close()
    answers = []
    for line in process.stdout:
        answers.append({"arrived_s": time.perf_counter() - started, **json.loads(line)})
    code = process.wait()
    return {"exit_code": code, "answers": answers}


def summary(run: dict) -> dict:
    """Start-up and per-question wall / LM seconds and overhead from ``timed_answers``' result."""
    rows, previous = [], None
    for index, answer in enumerate(run["answers"]):
        wall = answer["arrived_s"] - previous if previous is not None else answer["seconds"]
        rows.append({"question": index + 1, "wall_s": round(wall, 3), "seconds": answer["seconds"],
                     "lm_seconds": answer["lm_seconds"], "overhead_s": round(wall - answer["lm_seconds"], 3)})
        previous = answer["arrived_s"]
    first = run["answers"][0] if run["answers"] else None
    startup = round(first["arrived_s"] - first["seconds"], 3) if first else None
    later = rows[1:]
    return {"exit_code": run["exit_code"], "startup_s": startup, "questions": rows,
            "later_questions_within_lm_plus_1s": bool(later) and all(r["overhead_s"] <= 1.0 for r in later)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", required=True, help="a program written by 'kdspy compile'")
    parser.add_argument("--questions", type=int, default=3, help="the first N dev_tune questions (at least 2)")
    parser.add_argument("--lm", default=MODEL)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    if args.questions < 2:
        parser.error("--questions must be at least 2 (the second question is what is measured)")
    result = summary(timed_answers(args.program, question_lines(args.questions, args.data_dir), args.lm,
                                   args.data_dir))
    print_and_save(result, args.json)
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
