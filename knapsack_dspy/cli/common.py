"""Options and set-up shared by several sub-commands."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from knapsack_dspy.cli.main import UserError
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL


def add_lm_options(parser: argparse.ArgumentParser, default: str | None = DEFAULT_LOCAL_MODEL) -> None:
    group = parser.add_argument_group("language model")
    group.add_argument("--lm", default=default, metavar="MODEL",
                       help=f"LiteLLM model string: {DEFAULT_LOCAL_MODEL} (embedded, offline; default), "
                            "local/qwen2.5-coder-0.5b-instruct, local/PATH.gguf (any GGUF file), "
                            "openai/gpt-4o-mini, anthropic/..., "
                            "ollama_chat/qwen2.5, hosted_vllm/NAME, or openai/NAME with --api-base")
    group.add_argument("--api-base", metavar="URL", help="server address for OpenAI-compatible / vLLM / Ollama models")
    group.add_argument("--max-tokens", type=int, default=384, help="completion token limit per call (default 384)")
    group.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="seconds per LM attempt (default 120; local/ models: 600 of generation)")
    group.add_argument("--num-retries", type=int, metavar="N",
                       help="LM retries on transient failures: rate limits, 5xx, timeouts "
                            "(default 3; local/: 0)")
    group.add_argument("--no-cache", action="store_true", help="bypass DSPy's LM response cache")


def add_data_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data and caches")
    group.add_argument("--data-dir", metavar="DIR",
                       help="benchmark data folder (default $KDSPY_DATA_DIR, else ../shared/data)")
    group.add_argument("--cache-dir", metavar="DIR",
                       help="LM / embedding / model cache folder "
                            "(default $KDSPY_CACHE_DIR, else ~/.cache/knapsack-dspy)")


def add_mlflow_options(parser: argparse.ArgumentParser, where: str) -> None:
    group = parser.add_argument_group("experiment tracking (MLflow: pip install 'knapsack-dspy[mlflow]')")
    group.add_argument("--mlflow", nargs="?", const="", default=None, metavar="URI",
                       help="log this command to MLflow: the store at URI, else $MLFLOW_TRACKING_URI, else a local "
                            f"sqlite store in {where}/mlruns (no server; put --mlflow after the positional arguments)")
    group.add_argument("--mlflow-experiment", metavar="NAME", help="the MLflow experiment (created when missing)")
    group.add_argument("--mlflow-traces", action="store_true",
                       help="trace every DSPy call with mlflow.dspy.autolog (with --mlflow)")


def mlflow_session(args, default_dir, experiment: str, run_name: str, tags: dict, compile_traces: bool = False):
    """An active MLflow run for the command when ``--mlflow`` was given (else a context yielding None); a missing
    MLflow or a bad store is a one-line error before any work starts."""
    import contextlib

    if getattr(args, "mlflow_traces", False) and args.mlflow is None:
        raise UserError("--mlflow-traces traces into MLflow: give --mlflow too")
    if args.mlflow is None:
        return contextlib.nullcontext()
    from knapsack_dspy.bench.reporting.mlflow_tracking import (
        MlflowUnavailableError,
        require_mlflow,
        tracked_run,
        tracking_uri,
    )

    try:
        require_mlflow()
        uri = tracking_uri(args.mlflow or None, default_dir)
        return tracked_run(uri, args.mlflow_experiment or experiment, run_name, traces=args.mlflow_traces,
                           compile_traces=compile_traces, tags=tags)
    except MlflowUnavailableError as exc:
        raise UserError(str(exc)) from None


def setup_caches(args, lm: bool = True) -> None:
    """Point every cache at the chosen folder and switch the LM cache on or off (``lm=False``: no LM will be
    called, so DSPy's LM cache and LiteLLM, ~5 s to import, are left alone)."""
    from knapsack_dspy import paths

    if getattr(args, "cache_dir", None):
        os.environ[paths.CACHE_DIR_ENV] = str(args.cache_dir)
    if not lm:
        return
    from knapsack_dspy.llm.cache import configure_cache

    configure_cache(enabled=not getattr(args, "no_cache", False))


def resolve_data_dir(args):
    from knapsack_dspy import paths

    try:
        return paths.data_dir(getattr(args, "data_dir", None))
    except paths.ConfigError as exc:
        raise UserError(str(exc)) from None


def build_lm(args):
    """Check the model configuration (clear one-line errors) and build the dspy.LM."""
    from knapsack_dspy.llm import LLMConfigError, check_lm_config, make_lm

    try:
        check_lm_config(args.lm, api_base=args.api_base)
        return make_lm(args.lm, api_base=args.api_base, max_tokens=args.max_tokens, cache=not args.no_cache,
                       timeout=getattr(args, "timeout", None), num_retries=getattr(args, "num_retries", None))
    except LLMConfigError as exc:
        raise UserError(str(exc)) from None


def load_program_and_lm(args):
    """The compiled program ``args.program`` and the LM to ask it with (``--lm``, else the model it was compiled
    for; ``args.lm`` is set to it), with one-line errors for a missing or broken program file."""
    from knapsack_dspy.docqa.pipelines.pipeline import load_program

    path = Path(args.program)
    if not path.exists():
        raise UserError(f"program file {str(path)!r} not found (write one with 'kdspy compile')")
    try:
        program = load_program(path)
    except (ValueError, OSError, KeyError, TypeError) as exc:  # a file that is not a saved program
        raise UserError(f"{path}: {exc}") from None
    args.lm = args.lm or program.model
    return program, build_lm(args)


class ShownWhenAsked:
    """A value a help string shows (``%(name)s``, an attribute of the option's action) read only when the help is
    formatted: so building the parser loads nothing."""

    def __init__(self, read: Callable[[], Any]):
        self._read = read

    def __str__(self) -> str:
        value = self._read()
        return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


class SettingDefault(ShownWhenAsked):
    """An option's default standing for a setting's own, which lives where the setting is declared: read only when
    shown (``%(default)s`` in a help string; so parsing a command line loads nothing), and left out of what the
    command builds (:func:`given`), so the setting keeps its home's default."""


def registered_tasks() -> str:
    """The registered tasks' names, sorted (the built-in ones and the installed plug-ins')."""
    from knapsack_dspy.docqa.tasks import TASKS

    return ", ".join(sorted(TASKS))


def registered_selectors() -> str:
    """The registered selectors' names (the built-in ones and the installed plug-ins')."""
    from knapsack_dspy.selection.selectors.registry import SELECTORS

    return ", ".join(SELECTORS)


def base_selection_config():
    """The selection settings the commands start from: ``SelectionConfig``'s defaults (the one home of the selection
    defaults) with the document-QA tasks' attributes (SEER's modality)."""
    from knapsack_dspy.docqa.data.example_fields import DOCUMENT_ATTRIBUTES
    from knapsack_dspy.selection.config import SelectionConfig

    return SelectionConfig(attributes=DOCUMENT_ATTRIBUTES)


def selection_default(name: str) -> SettingDefault:
    """The default of selection setting ``name`` (:func:`base_selection_config`)."""
    return SettingDefault(lambda: getattr(base_selection_config(), name))


def given(args, names: Iterable[str]) -> dict[str, Any]:
    """The options among ``names`` given on the command line (those still at a ``SettingDefault`` left out)."""
    return {name: getattr(args, name) for name in names if not isinstance(getattr(args, name), SettingDefault)}


def parse_settings(pairs: Iterable[str], option: str = "--setting") -> dict[str, Any]:
    """``NAME=VALUE`` pairs as a dict; a VALUE that parses as JSON is that value (``200``, ``true``, ``null``,
    ``["question"]``, ``{"respect_budget": true}``), any other is the text itself."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{option} {pair!r}: expected NAME=VALUE, e.g. knn_k=100")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


def parse_list(text: str | None, cast=str) -> list:
    if text is None:
        return []
    try:
        return [cast(x.strip()) for x in str(text).split(",") if x.strip()]
    except ValueError as exc:
        raise UserError(f"could not parse list {text!r}: {exc}") from None
