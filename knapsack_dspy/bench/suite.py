"""Suite files (TOML): a grid of runs, datasets x pipelines x selectors x budgets x M x models.

Top-level keys are defaults for every run; each ``[[runs]]`` table overrides them for a group of runs
(without ``[[runs]]``, the top level is the only group). A list under a grid key expands into one run
per value; the product over all grid keys gives the runs. Example::

    name = "budget_sweep"
    dataset = "tatqa"
    pool_split = "dev_pool"
    eval_split = "dev_tune"
    pipeline = "pot"
    selector = ["seer", "kate"]
    budget = [1024, 2048]
    max_exemplars = [2, 4, 6, 8]
    model = "local/qwen2.5-coder-1.5b-instruct"
    limit = 100

Any field of ``RunSpec`` is a key (``alpha``, ``beta``, ``attributes``, ``seed``, ``max_tokens``, ...);
``example_ids = ["...", ...]`` evaluates only those questions of the eval split (an unknown id is an error);
``timeout`` (seconds per LM attempt) and ``num_retries`` set how the LM is asked (they are not part of a
run's key: changing them continues the same run); ``pool_dataset = "finqa_cases"`` draws the exemplar pool
from another data set than the questions (FinQA questions with documents, answered with case-based exemplars
that have none); ``samples = 5`` (with ``temperature``) turns on self-consistency in the program pipelines;
``route = "extract_compute"`` routes span questions to extraction.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from knapsack_dspy.file_limits import FileLimitError, read_file_text
from knapsack_dspy.selection.config import SelectionConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GRID_KEYS = ("dataset", "pipeline", "selector", "budget", "max_exemplars", "model", "retrieval")
MAX_SUITE_BYTES = 1_000_000  # a suite is a few hundred bytes of TOML
TRANSPORT_KEYS = ("timeout", "num_retries")  # how the LM is asked, not what: no part of a run's identity


class SuiteError(ValueError):
    """The suite file is malformed (message names the file and the key)."""


@dataclass(frozen=True)
class RunSpec:
    dataset: str = "tatqa"
    pipeline: str = "pot"  # pot | cot | few_shot | zero_shot (TAT-QA / FinQA); statute pipelines for SARA
    selector: str = "seer"
    budget: int = 2048
    max_exemplars: int = 4
    model: str = "local/qwen2.5-coder-1.5b-instruct"
    retrieval: str = ""  # SARA: mentioned_only | entire_section | references
    pool_split: str = "dev_pool"
    eval_split: str = "dev_tune"
    pool_path: str = ""
    eval_path: str = ""
    pool_dataset: str = ""  # the pool's data set when it is not ``dataset`` (e.g. finqa_cases for finqa questions)
    limit: int | None = None
    seed: int = 0
    alpha: float = 0.75
    beta: float = 0.0
    attributes: tuple = ("modality",)
    attribute_source: str = ""
    top_n_paragraphs: int | None = 3
    reserve_output_tokens: int = 256
    selection_only: bool = False
    api_base: str = ""
    num_threads: int = 1
    max_tokens: int = 384
    val_size: int = 40
    example_ids: tuple = ()  # evaluate only these questions of the eval split (in its order); empty: all
    timeout: float | None = None  # seconds per LM attempt (make_lm's default 120 s; local/: 600 s generating)
    num_retries: int | None = None  # LM retries on transient failures (make_lm's default: 3; local/: 0)
    route: str = ""  # "extract_compute": span questions extracted, the rest answered by the program; "": one solver
    samples: int = 1  # self-consistency: programs sampled per question, majority vote (program pipelines)
    temperature: float = 0.7  # their sampling temperature (used when samples > 1)

    def selection_config(self) -> SelectionConfig:
        """The run's selection settings (the ``SelectionConfig`` defaults for what a suite cannot set)."""
        return SelectionConfig(selector=self.selector, max_exemplars=self.max_exemplars, budget=self.budget,
                               reserve_output_tokens=self.reserve_output_tokens, alpha=self.alpha, beta=self.beta,
                               attributes=tuple(self.attributes), attribute_source=self.attribute_source or None,
                               val_size=self.val_size, seed=self.seed)

    @property
    def key(self) -> str:
        """A readable, stable identity of the run (what resuming matches on)."""
        parts = [self.dataset, self.pipeline, self.selector, f"b{self.budget}", f"m{self.max_exemplars}",
                 "selection-only" if self.selection_only else self.model]
        if self.retrieval:
            parts.append(self.retrieval)
        settings = {k: v for k, v in asdict(self).items() if k not in GRID_KEYS and k not in (
            "limit", "num_threads", "selection_only", *TRANSPORT_KEYS)}
        for name in _LATER_SETTINGS:  # keys of runs written before these settings existed stay the same
            if settings[name] == _FIELD_DEFAULTS[name]:
                del settings[name]
        digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
        return "|".join([*parts, digest])


_FIELD_TYPES = {f.name: f for f in fields(RunSpec)}
_FIELD_DEFAULTS = {f.name: f.default for f in fields(RunSpec)}
#: Settings added after results were recorded: left out of ``RunSpec.key`` at their defaults.
_LATER_SETTINGS = ("example_ids", "route", "pool_dataset", "samples", "temperature")


def _coerce(name: str, value: Any, source: str) -> Any:
    default = _FIELD_TYPES[name].default
    if name == "attributes":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SuiteError(f"{source}: 'attributes' must be a list of names")
        return tuple(value)
    if name == "example_ids":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise SuiteError(f"{source}: 'example_ids' must be a list of question ids")
        return tuple(value)
    if name in ("limit", "top_n_paragraphs") and value is None:
        return None
    if name == "timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise SuiteError(f"{source}: 'timeout' must be a positive number of seconds, got {value!r}")
        return float(value)
    if name == "num_retries":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SuiteError(f"{source}: 'num_retries' must be a non-negative integer, got {value!r}")
        return value
    if name == "samples" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise SuiteError(f"{source}: 'samples' must be an integer >= 1, got {value!r}")
    if name == "temperature" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value <= 2):
        raise SuiteError(f"{source}: 'temperature' must be a number from 0 to 2, got {value!r}")
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise SuiteError(f"{source}: {name!r} must be true or false, got {value!r}")
        return value
    if isinstance(default, int) or name in ("limit", "top_n_paragraphs"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SuiteError(f"{source}: {name!r} must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SuiteError(f"{source}: {name!r} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise SuiteError(f"{source}: {name!r} must be a string, got {value!r}")
    return value


def expand(group: dict, source: str) -> list[RunSpec]:
    unknown = set(group) - set(_FIELD_TYPES) - {"name", "runs", "output", "description"}
    if unknown:
        raise SuiteError(f"{source}: unknown keys {sorted(unknown)}; valid keys: {sorted(_FIELD_TYPES)}")
    scalars, axes = {}, []
    for name, value in group.items():
        if name not in _FIELD_TYPES:
            continue
        if name in GRID_KEYS and isinstance(value, list):
            if not value:
                raise SuiteError(f"{source}: {name!r} is an empty list")
            axes.append((name, [_coerce(name, v, source) for v in value]))
        else:
            scalars[name] = _coerce(name, value, source)
    runs = []
    for combo in itertools.product(*(vals for _, vals in axes)):
        params = dict(scalars)
        params.update({name: v for (name, _), v in zip(axes, combo, strict=True)})
        runs.append(RunSpec(**params))
    return runs


@dataclass
class Suite:
    name: str
    runs: list[RunSpec]
    output: str = ""
    description: str = ""
    source: str = ""
    raw: dict = field(default_factory=dict)


def load_suite(path: str | Path) -> Suite:
    path = Path(path)
    try:
        raw = tomllib.loads(read_file_text(path, limit_bytes=MAX_SUITE_BYTES))
    except FileNotFoundError:
        raise SuiteError(f"suite file {str(path)!r} not found") from None
    except FileLimitError as exc:
        raise SuiteError(f"{path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read the suite file ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise SuiteError(f"{path}: invalid TOML: nested too deeply") from None
    return suite_from_dict(raw, str(path))


def suite_from_dict(raw: dict, source: str = "<flags>") -> Suite:
    defaults = {k: v for k, v in raw.items() if k != "runs"}
    groups = raw.get("runs") or [{}]
    if not isinstance(groups, list):
        raise SuiteError(f"{source}: 'runs' must be an array of tables ([[runs]])")
    runs: list[RunSpec] = []
    seen = set()
    for i, group in enumerate(groups):
        merged = dict(defaults)
        merged.update(group)
        for run in expand(merged, f"{source} (runs[{i}])" if raw.get("runs") else source):
            if run.key not in seen:
                seen.add(run.key)
                runs.append(run)
    name = str(raw.get("name") or Path(source).stem)
    return Suite(name=name, runs=runs, output=str(raw.get("output") or ""),
                 description=str(raw.get("description") or ""), source=source, raw=raw)
