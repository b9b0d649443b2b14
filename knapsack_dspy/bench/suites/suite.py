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

Any field of ``RunSpec`` is a key (``max_tokens``, ``top_n_paragraphs``, ..., and every ``SelectionConfig`` setting:
``alpha``, ``beta``, ``attributes``, ``seed``, ``knn_k``, ``selector_params``, ...,
``bench/suites/selection_settings.py``);
``example_ids = ["...", ...]`` evaluates only those questions of the eval split (an unknown id is an error);
``order_seed = 26`` takes the eval split's questions in the order that seed fixes (``data.seeded_order``: the
questions of one document together) before ``example_ids`` / ``limit`` pick from them (``limit = 60``: the first
60 of that order);
``timeout`` (seconds per LM attempt) and ``num_retries`` set how the LM is asked (they are not part of a
run's key: changing them continues the same run); ``pool_dataset = "finqa_cases"`` draws the exemplar pool
from another data set than the questions (FinQA questions with documents, answered with case-based exemplars
that have none); ``samples = 5`` (with ``temperature``) turns on self-consistency in the program pipelines;
``route = "extract_compute"`` routes span questions to extraction; ``demo_order = "canonical"`` shows per-query
exemplars in one order over the pool (prompt-prefix reuse) and ``latency_budget`` (seconds) bounds the predicted
time of a prompt (``SelectionConfig``; docs/throughput.md); ``exemplar_budget`` bounds the exemplars' own tokens
beside ``budget`` (SEER's L; ``SelectionConfig.exemplar_budget``); ``statute_tokens`` bounds a SARA prompt's
statute text (``StatuteQA``; docs/retrieval.md); ``demo_table = "gold_rows"`` (with ``demo_table_rows``) and
``demo_paragraphs = "gold"`` cut what a TAT-QA demo shows to what its gold solution reads (``DocumentQA``;
``"auto"``, the default, is the task's: cut for TAT-QA's pot pipeline, whole elsewhere; ``"all"`` whole demos);
``evidence_selection = "knapsack"`` offers a query's document as pieces chosen with its demos in one knapsack instead
of today's fixed rules (``"rules"``, the default: ``DocumentQA`` / ``StatuteQA``; docs/retrieval.md, "Selectable
evidence"); ``pipeline = "cot:question -> answer"`` (or ``"predict:<signature>"``, ``"<module>:<attribute>"``)
answers with a plain DSPy program (``docqa/pipelines/program_qa.py``), for any task.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from knapsack_dspy.bench.suites.baseline_names import DSPY_BASELINES, is_dspy_baseline
from knapsack_dspy.bench.suites.schema import group_model, group_problems, run_problems
from knapsack_dspy.bench.suites.selection_settings import config_values, with_selection_settings
from knapsack_dspy.docqa.pipelines.pipeline import DEFAULT_DEMO_TABLE_ROWS, DEMO_PARAGRAPHS, DEMO_TABLES
from knapsack_dspy.docqa.pipelines.pipeline_names import (
    AUTO_DEMO_CUT,
    AUTO_ROUTE,
    DEMO_CUT_SETTINGS,
    ROUTED_PIPELINES,
    ROUTINGS,
    UNCUT,
    is_program_spec,
)
from knapsack_dspy.docqa.pipelines.program_qa import ProgramSpecError, make_program
from knapsack_dspy.docqa.pipelines.selectable_evidence import evidence_problem
from knapsack_dspy.docqa.retrieval.statute_strategies import STRATEGIES
from knapsack_dspy.docqa.tasks import TASKS
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.file_limits import FileLimitError, read_file_text
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL
from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.selectors.registry import SELECTORS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GRID_KEYS = ("dataset", "pipeline", "selector", "budget", "max_exemplars", "model", "retrieval")
MAX_SUITE_BYTES = 1_000_000  # a suite is a few hundred bytes of TOML
TRANSPORT_KEYS = ("timeout", "num_retries")  # how the LM is asked, not what: no part of a run's identity
#: The selector a DSPy baseline's run names in its ``SelectionConfig`` (the optimizer selects the demos; the config
#: carries the budget and the token accounting): one that needs no fit
BASELINE_CONFIG_SELECTOR = "kate_within_budget"


class SuiteError(KnapsackDspyError, ValueError):
    """The suite file is malformed (message names the file and the key)."""


@dataclass(frozen=True)
@with_selection_settings
class RunSpec:
    """One run of a suite: what is answered, by which pipeline and model, how the LM is asked, and -- added by
    ``with_selection_settings`` -- every ``SelectionConfig`` setting (``selector``, ``budget``, ``max_exemplars``,
    ``alpha``, ``attributes``, ``knn_k``, ``selector_params``, ...) with ``SelectionConfig``'s default (the bench's
    own: ``selection_settings.BENCH_DEFAULTS``). Every field is a suite key."""

    dataset: str = "tatqa"
    pipeline: str = "pot"  # pot | cot | few_shot | zero_shot (TAT-QA / FinQA); statute pipelines for SARA; cot |
    # predict (GSM8K); or any DSPy program: "cot:question -> answer", "my.module:factory" (ProgramQA)
    model: str = DEFAULT_LOCAL_MODEL
    retrieval: str = ""  # SARA: mentioned_only | entire_section | references
    pool_split: str = "dev_pool"
    eval_split: str = "dev_tune"
    pool_path: str = ""
    eval_path: str = ""
    pool_dataset: str = ""  # the pool's data set when it is not ``dataset`` (e.g. finqa_cases for finqa questions)
    limit: int | None = None
    top_n_paragraphs: int | None = 3
    selection_only: bool = False
    api_base: str = ""
    num_threads: int = 1
    max_tokens: int = 384
    example_ids: tuple = ()  # evaluate only these questions of the eval split (in its order); empty: all
    timeout: float | None = None  # seconds per LM attempt (make_lm's default 120 s; local/: 600 s generating)
    num_retries: int | None = None  # LM retries on transient failures (make_lm's default: 3; local/: 0)
    # "extract_compute": span questions extracted, the rest answered by the program; "": one solver; "auto" (the
    # default): the task's default route, resolved when the run is made (TAT-QA's pot routed, else none)
    route: str = AUTO_ROUTE
    samples: int = 1  # self-consistency: programs sampled per question, majority vote (program pipelines)
    temperature: float = 0.7  # their sampling temperature (used when samples > 1)
    order_seed: int | None = None  # the eval questions in the order this seed fixes (data.seeded_order), then limit
    statute_tokens: int | None = None  # SARA: the most statute tokens in a query or a demo (StatuteQA), cut by level
    # what a TAT-QA demo shows (DocumentQA; the query's document is never cut): "gold_rows" cuts its table to the
    # header rows, the rows its gold solution reads and their context up to demo_table_rows body rows;
    # demo_paragraphs = "gold": its evidence paragraphs only; "all": the whole demo; "auto" (the default): the task's
    # default, resolved when the run is made (TAT-QA's pot: gold_rows and gold; else all)
    demo_table: str = AUTO_DEMO_CUT
    demo_table_rows: int = DEFAULT_DEMO_TABLE_ROWS
    demo_paragraphs: str = AUTO_DEMO_CUT
    # an embedded model's prompt cache for this run even under KDSPY_LOCAL_REPRODUCIBLE=1 (llama.cpp's
    # cache_prompt): for arms whose prompts share a long fixed prefix (one demo set for every question), at the cost
    # of replies that depend on what the cache held; other models: no effect
    prompt_cache: bool = False
    # how a query's evidence is chosen (DocumentQA / StatuteQA): "rules" (today's fixed rules: the top paragraphs, the
    # whole table unless long) or "knapsack" (the document offered as pieces, chosen with the demos in one knapsack)
    evidence_selection: str = "rules"

    def __post_init__(self):
        task = TASKS.get(self.dataset)  # an unknown dataset is reported by the suite's checks
        if self.route == AUTO_ROUTE:
            object.__setattr__(self, "route", (task.default_route(self.pipeline) if task else None) or "")
        if AUTO_DEMO_CUT in (self.demo_table, self.demo_paragraphs):
            given = {"demo_table": self.demo_table, "demo_paragraphs": self.demo_paragraphs}
            cut = (task.demo_cut_for(self.pipeline, **given) if task
                   else {name: UNCUT if value == AUTO_DEMO_CUT else value for name, value in given.items()})
            for name, value in cut.items():
                object.__setattr__(self, name, value)

    def selection_config(self) -> SelectionConfig:
        """The run's selection settings as one ``SelectionConfig`` (a DSPy baseline's run names
        ``BASELINE_CONFIG_SELECTOR``, which it does not use)."""
        values = config_values(self)
        if is_dspy_baseline(self.selector):
            values["selector"] = BASELINE_CONFIG_SELECTOR
        return SelectionConfig(**values)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> RunSpec:
        """The run a stored row's ``spec`` (``asdict`` of a ``RunSpec``, through JSON) describes: lists back to
        tuples, keys this code does not know left out, fields added since at their defaults."""
        values = {k: tuple(v) if k in _TUPLE_FIELDS and isinstance(v, list) else v
                  for k, v in spec.items() if k in _FIELD_TYPES}
        values.setdefault("route", _KEY_DEFAULTS["route"])  # recorded before routes existed: one solver
        for name in DEMO_CUT_SETTINGS:  # recorded before demos were cut: whole demos
            values.setdefault(name, _KEY_DEFAULTS[name])
        return cls(**values)

    @property
    def key(self) -> str:
        """A readable, stable identity of the run (what resuming matches on)."""
        parts = [self.dataset, self.pipeline, self.selector, f"b{self.budget}", f"m{self.max_exemplars}",
                 "selection-only" if self.selection_only else self.model]
        if self.retrieval:
            parts.append(self.retrieval)
        settings = {k: v for k, v in asdict(self).items() if k not in GRID_KEYS and k not in (
            "limit", "num_threads", "selection_only", *TRANSPORT_KEYS)}
        for name in list(settings):  # keys of runs recorded before a setting existed stay the same
            if name not in _FIRST_KEY_SETTINGS and settings[name] == _KEY_DEFAULTS[name]:
                del settings[name]
        digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
        return "|".join([*parts, digest])


_FIELD_TYPES = {f.name: f for f in fields(RunSpec)}
_FIELD_DEFAULTS = {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(RunSpec)}
#: The settings in the key of the first recorded runs: always in ``RunSpec.key``. Every setting added since (a
#: ``RunSpec`` field or a ``SelectionConfig`` one: ``example_ids``, ``route``, ``demo_order``, ``knn_k``, ...) is
#: left out of the key at its default, so the keys of runs recorded before it existed stay the same. Never add
#: a name here.
_FIRST_KEY_SETTINGS = ("pool_split", "eval_split", "pool_path", "eval_path", "seed", "alpha", "beta", "attributes",
                       "attribute_source", "top_n_paragraphs", "reserve_output_tokens", "api_base", "max_tokens",
                       "val_size")
#: Settings whose default changed after runs were recorded: the key leaves them out at the value those runs had
#: (``route``: "" until the routed pipeline became the default; ``demo_table`` / ``demo_paragraphs``: "all" until
#: TAT-QA's program pipeline cut its demos by default), not at today's default.
_KEY_DEFAULTS = {**_FIELD_DEFAULTS, "route": "", "demo_table": UNCUT, "demo_paragraphs": UNCUT}
_GROUP = group_model(RunSpec, GRID_KEYS)
_TUPLE_FIELDS = tuple(f.name for f in fields(RunSpec) if str(f.type).startswith("tuple"))
_FLOAT_FIELDS = tuple(f.name for f in fields(RunSpec) if str(f.type).startswith("float"))


def _value(name: str, value: Any) -> Any:
    """A checked value as ``RunSpec`` holds it (a name list as a tuple, a number as a float)."""
    if name in _TUPLE_FIELDS:
        return tuple([value] if isinstance(value, str) else value)
    if name in _FLOAT_FIELDS and value is not None:
        return float(value)
    return value


def expand(group: dict, source: str) -> list[RunSpec]:
    """The runs of one (type-checked) run group: the product over its grid keys' lists."""
    scalars, axes = {}, []
    for name, value in group.items():
        if name not in _FIELD_TYPES:
            continue
        if name in GRID_KEYS and isinstance(value, list):
            axes.append((name, [_value(name, v) for v in value]))
        else:
            scalars[name] = _value(name, value)
    runs = []
    for combo in itertools.product(*(vals for _, vals in axes)):
        params = dict(scalars)
        params.update({name: v for (name, _), v in zip(axes, combo, strict=True)})
        runs.append(RunSpec(**params))
    return runs


def _dataset_problem(run: RunSpec) -> str | None:
    if run.dataset not in TASKS:
        return f"unknown dataset {run.dataset!r}; datasets: {', '.join(sorted(TASKS))}"
    return None


def _pipeline_problem(run: RunSpec) -> str | None:
    if is_program_spec(run.pipeline):  # a plain DSPy program, for any task
        try:
            make_program(run.pipeline)
        except ProgramSpecError as exc:
            return str(exc)
        return None
    if run.dataset not in TASKS:
        return None
    allowed = TASKS[run.dataset].pipelines
    return None if run.pipeline in allowed else (
        f"unknown pipeline {run.pipeline!r} for {run.dataset}; pipelines: {', '.join(allowed)}, or a DSPy "
        "program: 'cot:<signature>', 'predict:<signature>', '<module>:<attribute>'")


def _retrieval_problem(run: RunSpec) -> str | None:
    if run.retrieval and run.retrieval not in STRATEGIES:
        return f"unknown retrieval strategy {run.retrieval!r}; strategies: {', '.join(STRATEGIES)}"
    return None


def _selector_problem(run: RunSpec) -> str | None:
    if run.selector not in SELECTORS and not is_dspy_baseline(run.selector):
        return (f"unknown selector {run.selector!r}; ours: {', '.join(SELECTORS)}; DSPy's optimizers: "
                f"{', '.join(DSPY_BASELINES)}")
    return None


def _selection_problems(run: RunSpec) -> list[tuple[str, str]]:
    """(key, reason) of the run's selection settings as ``SelectionConfig`` checks them (the setting it names)."""
    if run.selector not in SELECTORS and not is_dspy_baseline(run.selector):
        return []
    selector = BASELINE_CONFIG_SELECTOR if is_dspy_baseline(run.selector) else run.selector
    settings = {name: value for name, value in config_values(run).items() if name != "selector"}
    found = []
    for name, value in settings.items():  # one setting at a time: every bad one is reported
        # the exemplar budget is checked against the whole prompt's (when that one is fine)
        together = ({"budget": run.budget} if name == "exemplar_budget" and all(n != "budget" for n, _ in found)
                    else {})
        try:
            SelectionConfig(selector=selector, **together, **{name: value})
        except SelectionConfigError as exc:
            found.append((name, str(exc)))
    if is_dspy_baseline(run.selector) and run.exemplar_budget is not None:
        found.append(("exemplar_budget", f"{run.selector} (a DSPy optimizer) measures the whole prompt only; "
                                         "an exemplar budget needs one of our selectors"))
    if not found:
        try:
            run.selection_config()
        except SelectionConfigError as exc:  # settings that are fine alone but not together
            found.append(("selector", str(exc)))
    return found


def _positive(name: str, allow_none: bool = False) -> Callable[[RunSpec], str | None]:
    def check(run: RunSpec) -> str | None:
        value = getattr(run, name)
        if value is None and allow_none:
            return None
        return None if value >= 1 else f"must be an integer >= 1, got {value!r}"
    return check


def _route_problem(run: RunSpec) -> str | None:
    if (run.route or None) not in ROUTINGS:
        return f"unknown route {run.route!r}; routes: {', '.join(r for r in ROUTINGS if r)} (or none)"
    task = TASKS.get(run.dataset)
    if run.route and task is not None and not task.routes(run.pipeline):
        return (f"route {run.route!r} routes between extraction and a program: pipeline "
                f"{' or '.join(map(repr, ROUTED_PIPELINES))}")
    return None


def _transport_problem(run: RunSpec) -> str | None:
    if run.timeout is not None and not run.timeout > 0:
        return f"timeout must be a positive number of seconds, got {run.timeout!r}"
    return None


def _retries_problem(run: RunSpec) -> str | None:
    if run.num_retries is not None and run.num_retries < 0:
        return f"num_retries must be a non-negative integer, got {run.num_retries!r}"
    return None


def _pool_dataset_problem(run: RunSpec) -> str | None:
    if run.pool_dataset and run.pool_dataset not in TASKS:
        return f"unknown dataset {run.pool_dataset!r}; datasets: {', '.join(sorted(TASKS))}"
    return None


def _statute_tokens_problem(run: RunSpec) -> str | None:
    if run.statute_tokens is None:
        return None
    task = TASKS.get(run.dataset)
    if task is not None and not task.takes_statute_budget:
        takers = ", ".join(sorted(name for name, t in TASKS.items() if t.takes_statute_budget))
        return f"a statute budget is for the statute tasks ({takers}), not {run.dataset!r}"
    return None if run.statute_tokens >= 1 else f"must be a positive number of tokens, got {run.statute_tokens!r}"


def _order_seed_problem(run: RunSpec) -> str | None:
    if run.order_seed is not None and run.order_seed < 0:
        return f"must be a non-negative integer (a seed), got {run.order_seed!r}"
    return None


def _demo_cut_problem(run: RunSpec) -> str | None:
    if run.demo_table not in DEMO_TABLES:
        return f"unknown demo_table {run.demo_table!r}; choose from {', '.join((AUTO_DEMO_CUT, *DEMO_TABLES))}"
    if run.demo_paragraphs not in DEMO_PARAGRAPHS:
        return (f"unknown demo_paragraphs {run.demo_paragraphs!r}; choose from "
                f"{', '.join((AUTO_DEMO_CUT, *DEMO_PARAGRAPHS))}")
    if run.demo_table_rows < 0:
        return f"demo_table_rows must be an integer >= 0, got {run.demo_table_rows!r}"
    task = TASKS.get(run.dataset)
    if task is not None and not task.cuts_demos and (run.demo_table, run.demo_paragraphs) != (UNCUT, UNCUT):
        return f"demo_table / demo_paragraphs cut table + text demos; {run.dataset}'s have none"
    return None


def _evidence_selection_problem(run: RunSpec) -> str | None:
    problem = evidence_problem(run.evidence_selection, run.pipeline)
    if problem or run.evidence_selection == "rules":
        return problem
    task = TASKS.get(run.dataset)
    if is_program_spec(run.pipeline) or (task is not None and not task.offers_evidence):
        return (f"evidence_selection {run.evidence_selection!r} offers a document's pieces; "
                f"{run.pipeline!r} on {run.dataset!r} has none")
    return None


def _temperature_problem(run: RunSpec) -> str | None:
    return None if 0 <= run.temperature <= 2 else f"must be a number from 0 to 2, got {run.temperature!r}"


_RUN_CHECKS = {"dataset": _dataset_problem, "pipeline": _pipeline_problem, "retrieval": _retrieval_problem,
               "pool_dataset": _pool_dataset_problem, "samples": _positive("samples"),
               "temperature": _temperature_problem, "order_seed": _order_seed_problem,
               "statute_tokens": _statute_tokens_problem, "demo_table": _demo_cut_problem,
               "evidence_selection": _evidence_selection_problem,
               "selector": _selector_problem, "route": _route_problem, "timeout": _transport_problem,
               "num_retries": _retries_problem, "limit": _positive("limit", allow_none=True),
               "top_n_paragraphs": _positive("top_n_paragraphs", allow_none=True),
               "max_tokens": _positive("max_tokens"), "num_threads": _positive("num_threads")}


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
    """The suite a TOML file (or flags) describes. Every problem of every run group is collected (types, unknown
    keys, then each run's dataset, pipeline, retrieval, selector and selection settings) and raised as one
    ``SuiteError``, one line per problem, before any run starts."""
    defaults = {k: v for k, v in raw.items() if k != "runs"}
    groups = raw.get("runs") or [{}]
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise SuiteError(f"{source}: 'runs' must be an array of tables ([[runs]])")
    runs: list[RunSpec] = []
    problems: list[str] = []
    seen = set()
    for i, group in enumerate(groups):
        merged = dict(defaults)
        merged.update(group)
        where = f"runs[{i}] " if raw.get("runs") else ""
        found, bad_keys = group_problems(_GROUP, merged, where, GRID_KEYS)
        problems += found
        checked = {k: v for k, v in merged.items() if k not in bad_keys}
        for run in expand(checked, where):
            problems += run_problems(run, where, _RUN_CHECKS)
            problems += [f"{where}{key}: {reason}" for key, reason in _selection_problems(run)]
            if found:
                continue
            if run.key not in seen:
                seen.add(run.key)
                runs.append(run)
    if problems:
        unique = list(dict.fromkeys(problems))
        raise SuiteError(f"{source}: {len(unique)} problem{'s' if len(unique) > 1 else ''}:\n  " + "\n  ".join(unique))
    name = str(raw.get("name") or Path(source).stem)
    return Suite(name=name, runs=runs, output=str(raw.get("output") or ""),
                 description=str(raw.get("description") or ""), source=source, raw=raw)
