"""Any DSPy program as the bench and the CLI run it: ``ProgramQA`` wraps a plain program named by a string.

A program is named by ``kind:argument``:

- ``cot:<signature>``: ``dspy.ChainOfThought(<signature>)``, e.g. ``cot:question -> answer`` (DSPy's GSM8K
  tutorial program); ``predict:<signature>``: ``dspy.Predict(<signature>)``;
- ``<module>:<attribute>``: the ``dspy.Module`` that attribute is (a copy), or that it builds when called (a
  ``dspy.Module`` class or a function of no arguments), e.g. ``my_package.programs:make_solver``. Importing the
  module runs its code, as a suite's Python would.

``ProgramQA`` is what a suite's run (``pipeline = "cot:question -> answer"``) compiles with ``KnapsackFewShot`` or
one of DSPy's optimizers, and answers with: it gives the program the example's fields its first predictor takes
(``field_map``: a program field read from an example field of another name, GSM8K's ``{"reasoning":
"derivation"}``: the worked solution is a chain-of-thought demo's reasoning), passes the example's id and
document as selection hints (a question is never its own demo) and returns the program's prediction with what its
first selecting predictor chose (``exemplar_ids``, ``selection``). Every predictor of the program gets a pool (its
signature's fields of each example, mapped); what a bench row measures (prompt tokens, within budget) is the
first selecting predictor's first prompt. Saved with its spec, so ``load_program`` rebuilds it.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping

import dspy

from knapsack_dspy.docqa.pipelines.pipeline_names import is_program_spec
from knapsack_dspy.docqa.pipelines.pipeline_spec import PipelineSpec, compiled_token_counter
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL
from knapsack_dspy.modules.select_exemplars import NotCompiledError, SelectExemplars, query_text
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.selection.config import SelectionConfig

__all__ = ["PROGRAM_KINDS", "ProgramQA", "ProgramSpecError", "is_program_spec", "make_program"]

#: ``kind:<signature>`` -> the DSPy module built on the signature
PROGRAM_KINDS = {"cot": dspy.ChainOfThought, "predict": dspy.Predict}
_NO_SELECTION = {"ids": [], "within_budget": True}


class ProgramSpecError(ValueError):
    """A program spec names no DSPy program (the message says why)."""


def _imported(path: str, attribute: str):
    try:
        found = importlib.import_module(path)
    except ImportError as exc:
        raise ProgramSpecError(f"cannot import {path!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ProgramSpecError(f"{path!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    return found


def make_program(spec: str) -> dspy.Module:
    """The DSPy program ``spec`` names (module docstring); ``ProgramSpecError`` saying why not."""
    if not is_program_spec(spec):
        raise ProgramSpecError(f"a program is named 'cot:<signature>', 'predict:<signature>' or "
                               f"'<module>:<attribute>', got {spec!r}")
    kind, _, argument = spec.partition(":")
    kind, argument = kind.strip(), argument.strip()
    if kind in PROGRAM_KINDS:
        try:
            return PROGRAM_KINDS[kind](argument)
        except Exception as exc:  # noqa: BLE001 - DSPy's signature parser raises several kinds
            raise ProgramSpecError(f"{spec!r}: not a DSPy signature: {exc}") from None
    found = _imported(kind, argument)
    if isinstance(found, dspy.Module):
        return copy.deepcopy(found)
    if callable(found):
        found = found()
    if not isinstance(found, dspy.Module):
        raise ProgramSpecError(f"{spec!r} is not a dspy.Module nor builds one (got {type(found).__name__})")
    return found


class ProgramQA(dspy.Module):
    """A plain DSPy program (``program``: its spec, ``make_program``) with the compile hooks and what the bench
    reads. ``selection``: the ``SelectionConfig`` (default: ``SelectionConfig()``; keyword settings replace single
    ones); ``field_map``: program field -> example field; ``model``: the target model (its tokenizer counts)."""

    def __init__(self, program: str, model: str | None = None, embedder=None, token_counter=None,
                 selection: SelectionConfig | None = None, field_map: Mapping[str, str] | None = None,
                 **selection_settings):
        super().__init__()
        spec = {"kind": "program", "program": program, "model": model}
        if field_map:
            spec["field_map"] = dict(field_map)
        self.spec = PipelineSpec(**spec)
        self.program = make_program(program)
        if not self.program.named_predictors():
            raise ProgramSpecError(f"{program!r} has no predictor: nothing to give demos to")
        self.embedder = embedder or TextEmbedder()
        self._selection_config = (selection or SelectionConfig()).with_settings(**selection_settings)
        self._token_counter = token_counter

    # -- what the program reads --------------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self.spec.spec.get("model") or DEFAULT_LOCAL_MODEL

    @property
    def field_map(self) -> dict:
        return dict(self.spec.spec.get("field_map") or {})

    @property
    def input_fields(self) -> list[str]:
        """The program's inputs: its first predictor's input fields."""
        return list(self.program.named_predictors()[0][1].signature.input_fields)

    def _value(self, example, name: str):
        value = example.get(self.field_map.get(name, name))
        return None if value is None or value == "" or value == [] else value

    def example_inputs(self, example) -> dict:
        """What the bench passes to ``forward`` for an example: the program's inputs, its id and document."""
        inputs = {name: self._value(example, name) for name in self.input_fields}
        return {**inputs, "id": example.get("id"), "doc_id": example.get("doc_id")}

    def trainset(self, pool) -> list[dspy.Example]:
        """The pool in the program's fields (every predictor's, mapped), inputs marked, ids and data set kept
        (the task's metric scores them): what DSPy's optimizers compile the program with."""
        names = dict.fromkeys(f for _, p in self.program.named_predictors() for f in p.signature.fields)
        out = []
        for example in pool:
            fields = {name: self._value(example, name) for name in names}
            fields = {k: v for k, v in fields.items() if v is not None}
            out.append(dspy.Example(**fields, id=example.get("id"), doc_id=example.get("doc_id"),
                                    dataset=example.get("dataset"))
                       .with_inputs(*self.input_fields))
        return out

    # -- compile hooks (KnapsackFewShot) ---------------------------------------------------------------------
    def demo_for(self, predictor_name: str, example):
        """A pool example in that predictor's fields (mapped); ``None`` when it lacks an input or every output."""
        signature = dict(self.named_predictors())[predictor_name].signature
        inputs = {name: self._value(example, name) for name in signature.input_fields}
        outputs = {name: self._value(example, name) for name in signature.output_fields}
        outputs = {k: v for k, v in outputs.items() if v is not None}
        if any(v is None for v in inputs.values()) or not outputs:
            return None
        return dspy.Example(**inputs, **outputs)

    def selection_config(self, predictor_name: str) -> SelectionConfig:
        return self._selection_config

    def prefetch_embeddings(self, examples, progress: bool = False) -> int:
        """Embed the examples' query texts in one batch (then served from the embedding cache)."""
        if not getattr(self.embedder, "use_cache", False):
            return 0
        fields = self._selection_config.embed_fields or self.input_fields
        texts = list(dict.fromkeys(query_text({f: self._value(ex, f) for f in fields}, fields) for ex in examples))
        if texts:
            self.embedder.encode(texts, progress=progress)
        return len(texts)

    # -- the compiled selection --------------------------------------------------------------------------
    def _selecting(self) -> SelectingPredict | None:
        return next((p for _, p in self.program.named_predictors() if isinstance(p, SelectingPredict)), None)

    @property
    def demo_predictor_name(self) -> str:
        """The predictor whose prompt a bench row measures: the first selecting one (else the first)."""
        target = self._selecting()
        names = [n for n, p in self.named_predictors() if target is None or p is target]
        return names[0]

    @property
    def select(self) -> SelectExemplars:
        compiled = self._selecting()
        if compiled is None:
            raise NotCompiledError("ProgramQA: no predictor is compiled: run KnapsackFewShot.compile or "
                                   "load_program first")
        return compiled.selection

    @property
    def selection_settings(self) -> SelectionConfig:
        compiled = self._selecting()
        return compiled.selection.config if compiled else self._selection_config

    @property
    def token_counter(self):
        return compiled_token_counter(self)

    def select_for(self, example) -> dict:
        """Selection only (no LM): what the first selecting predictor chooses for the example (its inputs are the
        program's)."""
        compiled = self._selecting()
        if compiled is None:
            raise NotCompiledError("ProgramQA is not compiled: nothing selects its demos")
        inputs = self.example_inputs(example)
        hints = {"id": inputs.pop("id"), "doc_id": inputs.pop("doc_id")}
        with selection_hints(**hints):
            return dict(compiled.select_demos(**inputs).info)

    # -- answering ---------------------------------------------------------------------------------------
    def forward(self, id: str | None = None, doc_id: str | None = None, **inputs):
        with selection_hints(id=id, doc_id=doc_id), selection_log() as selected:
            prediction = self.program(**inputs)
        return self._with_selection(prediction, selected)

    async def aforward(self, id: str | None = None, doc_id: str | None = None, **inputs):
        with selection_hints(id=id, doc_id=doc_id), selection_log() as selected:
            prediction = await self.program.acall(**inputs)
        return self._with_selection(prediction, selected)

    @staticmethod
    def _with_selection(prediction, selected) -> dspy.Prediction:
        selection = selected[0].info if selected else dict(_NO_SELECTION)
        fields = {k: v for k, v in dict(prediction).items() if k not in ("selection", "exemplar_ids")}
        return dspy.Prediction(**fields, exemplar_ids=selection.get("ids", []), selection=selection)

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key in ("_token_counter", "embedder", "_selection_config"):
                setattr(clone, key, value)  # shared: tokenizer handles and the embedder are process-wide
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone

