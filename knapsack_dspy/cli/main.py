"""``kdspy`` command line: one sub-command per module in this package.

Each sub-command module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (called with the parsed args, returning an exit code). Modules import heavy dependencies
(dspy, torch, models) inside their ``run`` functions so that ``kdspy --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from knapsack_dspy import __version__
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line

# Sub-command modules, in the order shown by --help. Missing ones are skipped.
SUBCOMMAND_MODULES = ("score", "compile", "ask", "bench", "report", "serve", "serve_model", "demo")
EXIT_BROKEN_PIPE = 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)


class UserError(KnapsackDspyError):
    """An error caused by the user's input: printed as one clear line, exit code 2."""


def _user_facing_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message is the whole story (bad config, data, model set-up): no traceback. Every error of
    knapsack-dspy's tree (``knapsack_dspy.errors.KnapsackDspyError``), and MLflow's when MLflow is loaded (a store
    it cannot open or write).

    Only modules already imported are consulted: an error can only come from a loaded module, and importing
    MLflow while a failed read's data is still referenced (by the traceback) would raise the peak memory of a
    one-line error or fail on its own."""
    errors: list[type[BaseException]] = [KnapsackDspyError]
    mlflow_error = getattr(sys.modules.get("mlflow.exceptions"), "MlflowException", None)
    if mlflow_error is not None:
        errors.append(mlflow_error)
    return tuple(errors)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kdspy",
        description=(
            "knapsack-dspy: compile DSPy programs whose few-shot exemplars are chosen by a knapsack "
            "ILP (similarity under a token budget, a maximum count and diversity constraints), then "
            "answer questions over tables + text and run benchmark suites."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"knapsack_dspy.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"knapsack_dspy.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def _one_line_for(exc: Exception, args) -> str | None:
    """The message of an error the user can act on, or None for a bug (shown with its traceback): the CLI's
    own user-facing errors, any failure of an LM call (``describe_lm_error``: what failed, what to do), and a
    file that cannot be read or written (an ``OSError`` naming it)."""
    if isinstance(exc, _user_facing_errors()):
        return str(exc)
    lm_errors = sys.modules.get("knapsack_dspy.llm.errors")  # loaded by make_lm: no LM made, no LM failure
    if lm_errors is not None and lm_errors.lm_error_kind(exc) is not None:
        return lm_errors.describe_lm_error(exc, model=getattr(args, "lm", None),
                                           api_base=getattr(args, "api_base", None))
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return None


#: what the commands need beyond the base install (the optimizer): the bench extra (pyproject.toml)
BENCH_EXTRA_MODULES = ("sympy", "matplotlib")


def missing_extras() -> list[str]:
    """The bench extra's modules not installed (looked up, not imported)."""
    import importlib.util

    return [name for name in BENCH_EXTRA_MODULES if importlib.util.find_spec(name) is None]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    missing = missing_extras()
    if missing:
        print(f"kdspy {args.command}: error: kdspy needs the bench extra ({', '.join(missing)} not installed): "
              "pip install 'knapsack-dspy[bench]'", file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate from a model prints escaped, not as a crash
        if callable(getattr(stream, "reconfigure", None)):
            stream.reconfigure(errors="backslashreplace")
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a reader that went away (| head) is found here, not at exit
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        message = _one_line_for(exc, args)
        if message is None:
            raise
        print(f"kdspy {args.command}: error: {one_line(message, 2000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kdspy {args.command}: interrupted (completed work is saved; re-run to resume)",
              file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """The reader of our stdout has gone (``kdspy score ... | head``): point stdout at /dev/null so the
    interpreter's final flush does not print a BrokenPipeError traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass


if __name__ == "__main__":  # pragma: no cover
    # ``python -m knapsack_dspy.cli.main``: run the package's module, not this ``__main__`` copy, whose
    # UserError would be another class than the one the sub-commands raise (and print as a traceback)
    from knapsack_dspy.cli.main import main as package_main

    sys.exit(package_main())
