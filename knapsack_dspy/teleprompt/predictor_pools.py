"""Each compiled predictor's exemplar pool: demos in that predictor's own fields, drawn from the trainset.

Three sources, in this order of precedence:

1. a **teacher** (``KnapsackFewShot.compile(..., teacher=...)``): the teacher runs on every trainset example
   with DSPy tracing on (as ``BootstrapFewShot`` does); a metric, if given, keeps only the successful runs; each
   predictor's traced calls (inputs and outputs) become its pool, matched by predictor name;
2. the student's hook ``demo_for(predictor_name, example) -> dspy.Example | dict | None`` (``None``: the
   example is not in that predictor's pool);
3. otherwise the trainset example itself, restricted to the predictor's signature: every input field and
   every output field the trainset supplies must be there (an output no trainset example has, such as a
   ``ChainOfThought``'s ``reasoning``, is left out of every demo, which DSPy's adapters show as a partial
   demo); an example missing one is skipped.

A validation query's inputs to a predictor come from the hook ``inputs_for(predictor_name, example)`` when the
student has it, else from the example's fields of the signature's inputs. With that hook a trainset pool also
keeps each pool example's inputs as a query would give them (``PredictorPool.query_inputs``): a demo may show
less than its query (cut to its evidence), and a query with those inputs is that exemplar, never selected for
itself (``SelectExemplars.same_inputs_ids``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
from tqdm.auto import tqdm

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.modules.compile_hooks import DemoFor, InputsFor
from knapsack_dspy.modules.selection_context import selection_hints

__all__ = ["PoolError", "PredictorPool", "empty_pool_reason", "pools_from_teacher", "pools_from_trainset",
           "query_inputs"]


class PoolError(KnapsackDspyError, ValueError):
    """A pool cannot be built (the message says why)."""


@dataclass
class PredictorPool:
    """One predictor's pool: the trainset examples it came from (ids, documents, attributes) and their demos."""

    name: str
    examples: list = field(default_factory=list)  # source trainset examples
    demos: list[dict] = field(default_factory=list)  # the same, in the predictor's fields
    ids: list[str] = field(default_factory=list)
    skipped: int = 0  # trainset examples that gave this predictor no demo
    query_inputs: list[dict | None] = field(default_factory=list)  # each one's inputs as a query (None: its demo's)

    def add(self, example, demo: Mapping, pool_id: str, query_inputs: Mapping | None = None) -> None:
        self.examples.append(example)
        self.demos.append(dict(demo))
        self.ids.append(pool_id)
        self.query_inputs.append(None if query_inputs is None else dict(query_inputs))


def _get(example, key, default=None):
    try:
        return example.get(key, default)
    except AttributeError:
        return default


def _example_id(example, index: int) -> str:
    value = _get(example, "id")
    return str(index) if value is None else str(value)


def _restrict(demo: Mapping, signature) -> dict:
    return {k: v for k, v in dict(demo).items() if k in signature.fields}


def _as_mapping(demo) -> dict:
    return dict(demo.toDict() if hasattr(demo, "toDict") else demo)


def _progress(iterable: Iterable, total: int, desc: str, enabled: bool):
    return tqdm(iterable, total=total, desc=desc, leave=False) if enabled else iterable


def _check_unique_ids(trainset: Sequence) -> None:
    seen: dict[str, int] = {}
    for i, example in enumerate(trainset):
        key = _example_id(example, i)
        if key in seen:
            raise PoolError(f"trainset examples {seen[key]} and {i} have the same id {key!r}: ids must be unique "
                            "(they name the exemplars in selections and saved programs)")
        seen[key] = i


def pools_from_trainset(program: dspy.Module, predictors: Mapping[str, dspy.Predict], trainset: Sequence,
                        progress: bool = False) -> dict[str, PredictorPool]:
    """Every named predictor's pool from the trainset: the student's ``demo_for`` hook, else the example
    restricted to the signature, with the ``inputs_for`` hook's query inputs (module docstring)."""
    _check_unique_ids(trainset)
    hook = program.demo_for if isinstance(program, DemoFor) else None
    inputs_hook = program.inputs_for if isinstance(program, InputsFor) else (lambda name, example: None)
    pools = {}
    for name, predictor in predictors.items():
        signature = predictor.signature
        pool = PredictorPool(name)
        supplied = [f for f in signature.output_fields
                    if any(_get(ex, f) is not None for ex in trainset)]
        required = [*signature.input_fields, *supplied]
        for i, example in enumerate(_progress(trainset, len(trainset), f"pool of {name}", progress)):
            if hook is not None:
                demo = hook(name, example)
                if demo is not None:
                    pool.add(example, _restrict(_as_mapping(demo), signature), _example_id(example, i),
                             inputs_hook(name, example))
                else:
                    pool.skipped += 1
                continue
            if supplied and all(_get(example, f) is not None for f in required):
                pool.add(example, {f: example[f] for f in required}, _example_id(example, i),
                         inputs_hook(name, example))
            else:
                pool.skipped += 1
        pools[name] = pool
    return pools


def _fields_of(example) -> set[str]:
    """The fields an example has (with a value)."""
    try:
        items = example.items() if hasattr(example, "items") else dict(example).items()
    except (TypeError, ValueError):
        return set()
    return {str(k) for k, v in items if v is not None}


def _listed(names: Iterable[str], most: int = 12) -> str:
    names = list(names)
    shown = ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")
    return shown or "none"


def empty_pool_reason(program: dspy.Module, name: str, predictor: dspy.Predict, trainset: Sequence) -> str:
    """Why ``pools_from_trainset`` gave predictor ``name`` no demo: the fields a demo needs and the fields the
    trainset's examples have (or the student's ``demo_for`` hook)."""
    if isinstance(program, DemoFor):
        return f"the student's demo_for hook returned None for every trainset example ({len(trainset)})"
    signature = predictor.signature
    inputs, outputs = list(signature.input_fields), list(signature.output_fields)
    present = [_fields_of(example) for example in trainset]
    seen = sorted(set().union(*present)) if present else []
    missing_inputs = [f for f in inputs if f not in seen]
    missing = (f"no example has {_listed(missing_inputs)}" if missing_inputs else
               f"no example has {_listed(outputs)}" if not any(f in seen for f in outputs) else
               "no single example has all of them")
    return (f"a demo of predictor {name!r} needs every input field of its signature ({_listed(inputs)}) and at "
            f"least one output field ({_listed(outputs)}); the trainset's examples have {_listed(seen)} ({missing}); "
            "rename the fields, or give the student a demo_for(predictor_name, example) hook")


def pools_from_teacher(teacher: dspy.Module, predictors: Mapping[str, dspy.Predict], trainset: Sequence, *,
                       metric: Callable | None = None, progress: bool = False) -> tuple[dict[str, PredictorPool], dict]:
    """Every named predictor's pool from the teacher's traces on the trainset (module docstring). Returns the
    pools and a summary (runs, successes, failures, the first error)."""
    _check_unique_ids(trainset)
    names_of = {id(p): name for name, p in teacher.named_predictors()}
    missing = [name for name in predictors if name not in names_of.values()]
    if missing:
        raise PoolError(f"the teacher has no predictor {missing} (its predictors: {sorted(names_of.values())}); "
                        "the teacher must have the student's structure")
    if dspy.settings.lm is None and not all(p.lm for _, p in teacher.named_predictors()):
        raise PoolError("teacher=: the teacher runs on the trainset, which needs an LM (dspy.configure(lm=...))")
    pools = {name: PredictorPool(name) for name in predictors}
    summary: dict[str, Any] = {"runs": 0, "successes": 0, "failures": 0, "rejected_by_metric": 0, "first_error": None}
    for i, example in enumerate(_progress(trainset, len(trainset), "teacher traces", progress)):
        try:
            inputs = example.inputs()
        except (AttributeError, ValueError) as exc:
            raise PoolError(f"trainset example {i}: a teacher run needs the example's inputs marked "
                            f"(dspy.Example(...).with_inputs(...)): {exc}") from None
        summary["runs"] += 1
        try:
            with dspy.context(trace=[]), selection_hints(id=_get(example, "id"), doc_id=_get(example, "doc_id")):
                prediction = teacher(**inputs)
                trace = list(dspy.settings.trace)
        except Exception as exc:  # noqa: BLE001 - one failed teacher run drops its example, as BootstrapFewShot
            summary["failures"] += 1
            summary["first_error"] = summary["first_error"] or f"{type(exc).__name__}: {exc}"
            continue
        if metric is not None and not metric(example, prediction, trace):
            summary["rejected_by_metric"] += 1
            continue
        summary["successes"] += 1
        seen: dict[str, int] = {}
        for predictor, call_inputs, outputs in trace:
            name = names_of.get(id(predictor))
            if name not in pools:
                continue
            signature = predictors[name].signature
            demo = _restrict({**dict(call_inputs), **_as_mapping(outputs)}, signature)
            k = seen[name] = seen.get(name, 0) + 1
            base = _example_id(example, i)
            pools[name].add(example, demo, base if k == 1 else f"{base}#{k}")
    for pool in pools.values():
        pool.skipped = summary["runs"] - len({id(ex) for ex in pool.examples})
    return pools, summary


def query_inputs(program: dspy.Module, name: str, predictor: dspy.Predict, example) -> dict | None:
    """A validation query's inputs to one predictor: the student's ``inputs_for`` hook, else the example's
    fields of the signature's inputs (``None`` when one is missing)."""
    if isinstance(program, InputsFor):
        inputs = program.inputs_for(name, example)
        return None if inputs is None else dict(inputs)
    fields = list(predictor.signature.input_fields)
    if any(_get(example, f) is None for f in fields):
        return None
    return {f: example[f] for f in fields}
