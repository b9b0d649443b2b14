"""``kdspy ask``: answer one question with a compiled program, showing how the answer came about."""

from __future__ import annotations

import argparse
import csv
import io
import json

from knapsack_dspy.cli.common import add_data_options, add_lm_options, load_program_and_lm, setup_caches
from knapsack_dspy.cli.main import UserError

EPILOG = """examples:
  kdspy ask prog.json --table report.csv --text notes.txt --question "What was the change in revenue?"
  kdspy ask prog.json --input question.json      # {"question": ..., "table": [[...], ...], "paragraphs": [...]}

Prints the selected exemplars (id, question, tokens), the model's program or reasoning, and the
executed answer with its scale. --json prints one JSON object instead.
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


def read_inputs(args) -> dict:
    from knapsack_dspy.data.query_inputs import QueryInputError, check_query_inputs
    from knapsack_dspy.file_limits import FileLimitError, check_text_values, parse_json

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
        text = _input_text(args.table, "table file")
        try:
            check_text_values(text)
            inputs["table"] = list(csv.reader(io.StringIO(text, newline="")))
        except FileLimitError as exc:
            raise UserError(f"table file {args.table}: {exc}") from None
        except csv.Error as exc:
            raise UserError(f"{args.table}: invalid CSV ({exc})") from None
    if args.text:
        text = _input_text(args.text, "text file")
        inputs["paragraphs"] = [p.strip() for p in text.split("\n\n") if p.strip()]
    if args.question:
        inputs["question"] = args.question
    if not inputs["question"] or not str(inputs["question"]).strip():
        raise UserError("no question: pass --question or an --input JSON with a 'question'")
    try:
        return check_query_inputs(str(inputs["question"]), inputs["table"], inputs["paragraphs"])
    except QueryInputError as exc:
        raise UserError(str(exc)) from None


def run(args) -> int:
    import dspy

    setup_caches(args)
    inputs = read_inputs(args)
    program, lm = load_program_and_lm(args)
    with dspy.context(lm=lm):
        pred = program(**inputs)
    pool = {pid: i for i, pid in enumerate(program.select.pool_ids)}
    exemplars = [{"id": i, "question": program.select.demos[pool[i]].get("question"),
                  "tokens": program.select.costs[pool[i]]} for i in pred.selection.get("ids", [])]
    result = {"question": inputs["question"], "answer": pred.answer, "scale": getattr(pred, "scale", None),
              "program": getattr(pred, "program", None), "reasoning": getattr(pred, "reasoning", None),
              "error": getattr(pred, "error", None), "exemplars": exemplars,
              "prompt_tokens": pred.selection.get("prompt_tokens"), "budget": pred.selection.get("budget")}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(f"Question: {inputs['question']}\n")
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
    return 0
