"""``kdspy ask``: answer one question with a compiled program, showing how the answer came about; with
``--interactive``, answer one question per line of standard input with the program and model loaded once."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from knapsack_dspy.cli.common import add_data_options, add_lm_options, load_program_and_lm, setup_caches
from knapsack_dspy.cli.main import UserError

EPILOG = """examples:
  kdspy ask prog.json --table report.csv --text notes.txt --question "What was the change in revenue?"
  kdspy ask prog.json --input question.json      # {"question": ..., "table": [[...], ...], "paragraphs": [...]}

  kdspy ask prog.json --table report.csv --interactive      # one question per line; Ctrl-D ends
  printf '%s\n' '{"question": "...", "table": [["a", "b"]]}' | kdspy ask prog.json --interactive --json

Prints the selected exemplars (id, question, tokens), the model's program or reasoning, and the
executed answer with its scale. --json prints one JSON object instead.

--interactive reads standard input line by line: a line is a question (asked about the --table / --text /
--input document) or a JSON object with its own question, table and paragraphs. Each answer is printed as
soon as it is known (--json: one JSON object per line); a bad line gets a one-line error on standard error
and the next line is read. The program, the embedder and the model are loaded once, so a second question
costs its LM time and little more: each answer reports its "seconds" and, of those, "lm_seconds".
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("ask", help="answer a question with a compiled program", description=__doc__,
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", help="program JSON written by 'kdspy compile'")
    p.add_argument("--question", "-q", help="the question")
    p.add_argument("--table", metavar="CSV", help="the table as CSV (first row the header)")
    p.add_argument("--text", metavar="TXT", help="the text: paragraphs separated by blank lines")
    p.add_argument("--input", metavar="JSON", help="question, table and paragraphs as one JSON object")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--interactive", action="store_true",
                   help="answer one question per line of standard input (text, or a JSON object) until it ends")
    add_lm_options(p, default=None)
    add_data_options(p)
    p.set_defaults(func=run)


def _input_text(path: str, what: str) -> str:
    """A text file the user gave (bounded by ``knapsack_dspy.file_limits``); one-line errors."""
    from knapsack_dspy.file_limits import GZIP_ERRORS, FileLimitError, read_file_text

    try:
        return read_file_text(path)
    except FileNotFoundError:
        raise UserError(f"{what} {path!r} not found") from None
    except FileLimitError as exc:
        raise UserError(f"{what} {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, *GZIP_ERRORS) as exc:
        raise UserError(f"{what} {path}: cannot read ({exc})") from None


def read_inputs(args, need_question: bool = True) -> dict:
    from knapsack_dspy.file_limits import FileLimitError, parse_json

    inputs = {"question": None, "table": [], "paragraphs": []}
    if args.input:
        try:
            data = parse_json(_input_text(args.input, "input file"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{args.input}: invalid JSON ({exc})") from None
        except FileLimitError as exc:
            raise UserError(f"{args.input}: {exc}") from None
        if not isinstance(data, dict):
            raise UserError(f"{args.input}: expected a JSON object with question, table, paragraphs")
        inputs.update({k: data[k] for k in ("question", "table", "paragraphs") if k in data})
    if args.table:
        inputs["table"] = _csv_rows(_input_text(args.table, "table file"), f"table file {args.table}")
    if args.text:
        text = _input_text(args.text, "text file")
        inputs["paragraphs"] = [p.strip() for p in text.split("\n\n") if p.strip()]
    if args.question:
        inputs["question"] = args.question
    return checked_inputs(inputs, need_question=need_question)


def _csv_rows(text: str, where: str) -> list:
    from knapsack_dspy.file_limits import FileLimitError, check_text_values

    try:
        check_text_values(text)
        return list(csv.reader(io.StringIO(text, newline="")))
    except FileLimitError as exc:
        raise UserError(f"{where}: {exc}") from None
    except csv.Error as exc:
        raise UserError(f"{where}: invalid CSV ({exc})") from None


def checked_inputs(inputs: dict, need_question: bool = True) -> dict:
    """``inputs`` (question, table, paragraphs) if they can be asked (``data.query_inputs``); a one-line
    ``UserError`` otherwise. ``need_question=False`` (``--interactive``): the document alone, its questions come
    later (``question`` stays None)."""
    from knapsack_dspy.docqa.data.query_inputs import QueryInputError, check_query_inputs

    question = inputs["question"]
    if need_question and (not question or not str(question).strip()):
        raise UserError("no question: pass --question or an --input JSON with a 'question'")
    try:
        checked = check_query_inputs(str(question) if question else "(questions follow)", inputs["table"],
                                     inputs["paragraphs"])
    except QueryInputError as exc:
        raise UserError(str(exc)) from None
    return {**checked, "question": checked["question"] if question else None}


def line_inputs(line: str, document: dict) -> dict:
    """One line of ``--interactive`` input: a JSON object (its question, table and paragraphs; the document's
    where it has none) or the text of a question about ``document``."""
    from knapsack_dspy.file_limits import FileLimitError, parse_json

    text = line.strip()
    if text.startswith("{"):
        try:
            data = parse_json(text)
        except (json.JSONDecodeError, FileLimitError) as exc:
            raise UserError(f"not a JSON object ({exc})") from None
        if not isinstance(data, dict):
            raise UserError("expected a JSON object with question, table, paragraphs")
        inputs = {**document, **{k: data[k] for k in ("question", "table", "paragraphs") if k in data}}
    else:
        inputs = {**document, "question": text}
    return checked_inputs(inputs)


def run(args) -> int:
    import dspy

    if args.interactive and args.question:
        raise UserError("--interactive reads the questions from standard input: leave out --question")
    setup_caches(args)
    inputs = read_inputs(args, need_question=not args.interactive)
    program, lm = load_program_and_lm(args)
    with dspy.context(lm=lm):
        if args.interactive:
            return _interactive(program, inputs, args.json)
        _print(answer(program, inputs), args.json)
    return 0


def answer(program, inputs: dict) -> dict:
    """Answer ``inputs`` with ``program`` (the LM configured): what ``kdspy ask`` prints, with ``seconds`` (the
    question's wall time, from its inputs to its answer) and ``lm_seconds`` (of which inside LM calls)."""
    import time

    import dspy

    from knapsack_dspy.bench.execution.lm_timing import LMTimer

    timer = LMTimer()
    started = time.perf_counter()
    with dspy.context(callbacks=[*dspy.settings.callbacks, timer]):
        pred = program(**inputs)
    seconds = time.perf_counter() - started
    pool = {pid: i for i, pid in enumerate(program.select.pool_ids)}
    exemplars = [{"id": i, "question": program.select.demos[pool[i]].get("question"),
                  "tokens": program.select.costs[pool[i]]} for i in pred.selection.get("ids", [])]
    return {"question": inputs["question"], "answer": pred.answer, "scale": getattr(pred, "scale", None),
            "program": getattr(pred, "program", None), "reasoning": getattr(pred, "reasoning", None),
            "error": getattr(pred, "error", None), "exemplars": exemplars,
            "prompt_tokens": pred.selection.get("prompt_tokens"), "budget": pred.selection.get("budget"),
            "seconds": round(seconds, 3), "lm_seconds": round(timer.seconds, 3)}


def _interactive(program, document: dict, as_json: bool) -> int:
    """Answer each line of standard input; a bad line or a failed LM call is one line on stderr, then the next
    line is read. Exit 0 when the input ends (2 if any line failed)."""
    from knapsack_dspy.llm import describe_lm_error, lm_error_kind
    from knapsack_dspy.messages import one_line

    failed = 0
    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            _print(answer(program, line_inputs(line, document)), as_json, json_lines=True)
        except UserError as exc:
            failed += 1
            print(f"kdspy ask: line {number}: {exc}", file=sys.stderr, flush=True)
        except Exception as exc:  # an LM fault ends this question, not the session
            if lm_error_kind(exc) is None:
                raise
            failed += 1
            print(f"kdspy ask: line {number}: {one_line(describe_lm_error(exc))}", file=sys.stderr, flush=True)
    return 2 if failed else 0


def _print(result: dict, as_json: bool, json_lines: bool = False) -> None:
    if as_json:
        print(json.dumps(result, default=str, indent=None if json_lines else 2), flush=True)
        return
    print(f"Question: {result['question']}\n")
    exemplars = result["exemplars"]
    print(f"Selected exemplars ({len(exemplars)}, prompt ~{result['prompt_tokens']} of {result['budget']} tokens):")
    for ex in exemplars:
        print(f"  - [{ex['id']}] ({ex['tokens']:.0f} tok) {ex['question']}")
    if result["reasoning"]:
        print(f"\nReasoning:\n{result['reasoning']}")
    if result["program"]:
        print(f"\nProgram:\n{result['program']}")
    if result["error"]:
        print(f"\nExecution error: {result['error']}")
    scale = f" ({result['scale']})" if result["scale"] not in (None, "", "none") else ""
    print(f"\nAnswer: {result['answer']}{scale}")
    print(f"({result['seconds']:.1f} s, of which {result['lm_seconds']:.1f} s in the LM)", flush=True)
