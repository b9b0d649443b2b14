"""Ready-made pipelines: Retrieve -> SelectExemplars -> solver, and saving / loading compiled programs.

``DocumentQA`` (TAT-QA, FinQA): ``HybridRetriever`` keeps the table as a table and the paragraphs most
similar to the question; ``SelectExemplars`` picks demos under the token budget; the solver answers
(program of thought: the LM writes a program we execute; chain of thought; few-shot; zero-shot).
``StatuteQA`` (SARA): ``StatuteRetriever`` picks statute text by the question's citation; the statute
answerer gives Entailment / Contradiction or a dollar amount.

Both honour the compile contract of ``KnapsackFewShot`` (``render_demo``, ``prompt_inputs``,
``demo_signature``) and carry their own construction spec in the saved JSON, so ``load_program(path)``
rebuilds the right pipeline before loading its state. The selection settings are saved once, with the
``SelectExemplars`` state (its ``SelectionConfig``), not in the spec.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import dspy
from dspy.predict.parameter import Parameter

from knapsack_dspy.data.program_evidence import demo_evidence
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm.local_models import DEFAULT_LOCAL_MODEL
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.memo import BoundedMemo
from knapsack_dspy.modules.hybrid_retriever import HybridRetriever
from knapsack_dspy.modules.prompt_cost import PromptCostModel
from knapsack_dspy.modules.select_exemplars import SelectExemplars
from knapsack_dspy.modules.solvers import make_document_solver, make_statute_solver
from knapsack_dspy.modules.statute_retriever import StatuteRetriever
from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError

DOCUMENT_PIPELINES = ("pot", "python_pot", "finqa_pot", "cot", "few_shot", "zero_shot")
PROGRAM_PIPELINES = ("pot", "python_pot", "finqa_pot")  # the LM writes a program that is executed
STATUTE_PIPELINES = ("zero_shot", "few_shot", "cot")
SPEC_VERSION = 2
# Selection settings version-1 specs repeated (the SelectExemplars state holds them): dropped when loading.
_VERSION_1_SELECTION_KEYS = ("selector", "max_exemplars", "attributes")
#: StatuteQA's selection unless told otherwise: two nearest statutes' cases, no attribute templates.
STATUTE_SELECTION = SelectionConfig(selector="kate", max_exemplars=2, attributes=())
_rendered_demos = BoundedMemo(50_000)  # DocumentQA.render_demo results, keyed on the pipeline and the example


def spec_of_state(state) -> dict:
    """The constructor arguments a saved spec holds (a version-1 spec's selection settings dropped: the
    ``SelectExemplars`` state has them)."""
    if not isinstance(state, dict) or state.get("version") not in (1, SPEC_VERSION):
        raise ValueError(f"unsupported pipeline spec: {state!r}")
    dropped = _VERSION_1_SELECTION_KEYS if state["version"] == 1 else ()
    return {k: v for k, v in state.items() if k != "version" and k not in dropped}


class PipelineSpec(Parameter):
    """The constructor arguments of a pipeline, saved with its state (JSON) so it can be rebuilt."""

    def __init__(self, **spec):
        self.spec = dict(spec)

    def dump_state(self, json_mode=True):
        return {"version": SPEC_VERSION, **self.spec}

    def load_state(self, state):
        self.spec = spec_of_state(state)
        return self

    def reset(self):
        pass


class _Pipeline(dspy.Module):
    """Shared plumbing: the token counter, base-token counting, inputs of an example."""

    def __init__(self, spec: dict, token_counter=None):
        super().__init__()
        self.spec = PipelineSpec(**spec)
        self._token_counter = token_counter
        self._cost_model = None

    @property
    def model(self) -> str:
        return self.spec.spec.get("model") or DEFAULT_LOCAL_MODEL

    @property
    def token_counter(self):
        if self._token_counter is None:
            self._token_counter = get_token_counter(self.select.token_model or self.model)
        return self._token_counter

    @property
    def cost_model(self) -> PromptCostModel:
        if self._cost_model is None:
            self._cost_model = PromptCostModel(self.demo_signature, self.token_counter)
        return self._cost_model

    @property
    def demo_signature(self):
        return self.solve.predictor.signature

    @property
    def uses_demos(self) -> bool:
        return self.spec.spec.get("pipeline") != "zero_shot"

    # -- compile contract (subclasses define _retrieved: a query's retrieved context) --------------------
    def render_demo(self, example) -> dict:
        """A pool example in the solver's demo fields, its context retrieved as a query's is (FinQA documents: cut
        down to their evidence, ``DocumentQA._demo_retrieved``)."""
        return dict(self.solve.as_demo(dspy.Example(**{**dict(example), **self._demo_retrieved(example)})))

    def _demo_retrieved(self, example: Mapping) -> dict:
        return self._retrieved(example)

    def prompt_inputs(self, example) -> dict:
        return dict(self.solve.prompt_inputs(self._retrieved(example)))

    def prefetch_embeddings(self, examples, progress: bool = False) -> int:
        """Embed, in one batch, every text that retrieval and selection will embed for ``examples`` (they are
        then served from the embedding cache). One large length-sorted batch is many times faster than the
        per-example calls (measured: 150 TAT-QA questions, 140 s per example vs 7 s batched, cold cache).
        Returns the number of distinct texts; a no-op without an embedding cache."""
        embedder = self.select.embedder
        if not getattr(embedder, "use_cache", False):
            return 0
        texts: dict[str, None] = {}
        for example in examples:
            for text in self._texts_to_embed(example):
                texts.setdefault(text)
        if texts:
            embedder.encode(list(texts), progress=progress)
        return len(texts)

    def _texts_to_embed(self, example) -> list[str]:
        return [self.select.query_text(self._select_fields(example["question"], example.get("table"),
                                                           example.get("paragraphs")))]

    # -- shared inference ------------------------------------------------------------------------------
    def _select_fields(self, question, table, paragraphs) -> dict:
        """What ``SelectExemplars`` sees of the query (its embed fields, and the document for LM attributes)."""
        return {"question": question, "table": table, "paragraphs": paragraphs}

    def _select(self, query: Mapping, question, table, paragraphs, id, doc_id, attributes: Mapping):
        base = self.cost_model.base_tokens(self.solve.prompt_inputs(query))
        return self.select(base_tokens=base, id=id, doc_id=doc_id, **self._select_fields(question, table, paragraphs),
                           **attributes)

    def example_inputs(self, example) -> dict:
        """What the bench passes to ``forward`` for an example (inputs + ids + gold attributes for oracles)."""
        inputs = {k: example.get(k) for k in ("question", "table", "paragraphs")}
        inputs.update(id=example.get("id"), doc_id=example.get("doc_id"))
        inputs.update(self._gold_attributes(example))
        return inputs

    def _gold_attributes(self, example) -> dict:
        """The example's gold attribute values when selection aims at them (oracle runs), else nothing."""
        if self.select.attribute_source != "gold":
            return {}
        return {a: example.get(a) for a in self.select.config.attributes}

    def select_for(self, example) -> dict:
        """Selection only (no LM): the selection info for one example."""
        attrs = self._gold_attributes(example)
        return self._select(self._retrieved(example), example["question"], example.get("table"),
                            example.get("paragraphs"), example.get("id"), example.get("doc_id"), attrs).selection

    def forward(self, question: str, table=None, paragraphs=None, id: str | None = None, doc_id: str | None = None,
                **attributes):
        query = self._retrieved({"question": question, "table": table, "paragraphs": paragraphs})
        demos, selection = [], {"ids": [], "within_budget": True}
        if self.uses_demos:
            chosen = self._select(query, question, table, paragraphs, id, doc_id, attributes)
            demos, selection = chosen.demos, chosen.selection
        pred = self.solve(**query, demos=demos)
        return dspy.Prediction(**dict(pred), exemplar_ids=selection.get("ids", []), selection=selection)

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key in ("_token_counter", "_cost_model"):
                setattr(clone, key, value)  # shared: tokenizer handles are process-wide
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone


class DocumentQA(_Pipeline):
    """Questions over a table + text. ``pipeline``: pot (Python program, SEER style; for FinQA the DSL),
    python_pot (a Python program for any data set, FinQA included), finqa_pot (FinQA DSL),
    cot (reasoning then answer), few_shot (answer directly, with demos), zero_shot (no demos).

    ``selection``: the ``SelectionConfig`` (default: ``SelectionConfig()``); keyword arguments replace single
    settings of it (``selector="kate"``, ``max_exemplars=2``, ...); any other keyword is an error.
    ``samples`` / ``temperature``: self-consistency for the program pipelines (``ProgramOfThoughtAnswerer``);
    saved with the program when ``samples > 1``."""

    def __init__(self, pipeline: str = "pot", top_n_paragraphs: int | None = 3, model: str | None = None,
                 embedder=None, token_counter=None, selection: SelectionConfig | None = None, samples: int = 1,
                 temperature: float | None = None, **selection_settings):
        if pipeline not in DOCUMENT_PIPELINES:
            raise ValueError(f"unknown pipeline {pipeline!r} for table + text data; choose from {DOCUMENT_PIPELINES}")
        if samples != 1 and pipeline not in PROGRAM_PIPELINES:
            raise ValueError(f"samples={samples!r}: self-consistency votes over executed programs; pipeline "
                             f"{pipeline!r} writes none (use one of {PROGRAM_PIPELINES})")
        config = _selection(type(self).__name__, selection or SelectionConfig(), selection_settings)
        sampling = {"samples": samples, "temperature": temperature} if samples != 1 else {}
        super().__init__({"kind": "document", "pipeline": pipeline, "top_n_paragraphs": top_n_paragraphs,
                          "model": model, **sampling}, token_counter)
        embedder = embedder or TextEmbedder()  # one embedder (and cache) for retrieval and selection
        self.retrieve = HybridRetriever(top_n_paragraphs=top_n_paragraphs, embedder=embedder)
        self.select = SelectExemplars(config, embedder=embedder)
        self.solve = make_document_solver(pipeline, **sampling)

    def render_demo(self, example) -> dict:
        """As ``_Pipeline.render_demo``, remembered per process: a benchmark suite compiles the same pool once
        per selector, and rendering a demo (retrieval, gold-program synthesis and execution) costs ~1 ms. A demo
        depends on the solver (``pipeline``), the retrieval settings and the embedder, not on the selector."""
        model_id = getattr(self.select.embedder, "model_id", None)
        if model_id is None:  # an embedder that does not say which model it is: nothing to key on
            return super().render_demo(example)
        try:
            key = hashlib.sha256(json.dumps(
                [type(self).__qualname__, self.spec.spec["pipeline"], self.retrieve.top_n_paragraphs,
                 self.retrieve.max_table_rows, model_id, dict(example)],
                sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
        except (TypeError, ValueError):
            return super().render_demo(example)
        return copy.deepcopy(_rendered_demos.get_or_compute(key, lambda: super(DocumentQA, self).render_demo(example)))

    def _texts_to_embed(self, example) -> list[str]:
        return [*super()._texts_to_embed(example),
                *self.retrieve.texts_to_embed(example["question"], example.get("table"), example.get("paragraphs"))]

    def _retrieved(self, example: Mapping) -> dict:
        question = example["question"]
        table = list(example.get("table") or [])
        paragraphs = list(example.get("paragraphs") or [])
        ctx = self.retrieve(question=question, table=table, paragraphs=paragraphs)
        return {"question": question, "table": [table[i] for i in ctx.row_ids],
                "paragraphs": [paragraphs[i] for i in ctx.paragraph_ids]}

    def _demo_retrieved(self, example: Mapping) -> dict:
        """A FinQA document record as a demo shows it (documents average ~600 words): the header rows and the rows
        its gold program reads (``gold_inds`` when given, else found from the program's numbers:
        ``knapsack_dspy.data.program_evidence``), the sentences its program reads plus the sentences most similar to
        the question up to ``top_n_paragraphs``. Other records: as a query's retrieval keeps them."""
        evidence = demo_evidence(example)
        if evidence is None:
            return self._retrieved(example)
        question = example["question"]
        table = list(example.get("table") or [])
        paragraphs = list(example.get("paragraphs") or [])
        row_ids, paragraph_ids = self.retrieve.evidence_context(question, table, paragraphs, *evidence)
        return {"question": question, "table": [table[i] for i in row_ids],
                "paragraphs": [paragraphs[i] for i in paragraph_ids]}



class StatuteQA(_Pipeline):
    """SARA: statute retrieval by the question's citation (``retrieval`` strategy), then the answerer.

    ``selection``: the ``SelectionConfig`` (default: ``STATUTE_SELECTION``, KATE with two exemplars); keyword
    arguments replace single settings of it; any other keyword is an error."""

    def __init__(self, pipeline: str = "cot", retrieval: str = "mentioned_only", model: str | None = None,
                 embedder=None, token_counter=None, data_dir=None, selection: SelectionConfig | None = None,
                 **selection_settings):
        if pipeline not in STATUTE_PIPELINES:
            raise ValueError(f"unknown pipeline {pipeline!r} for statutes; choose from {STATUTE_PIPELINES}")
        config = _selection(type(self).__name__, selection or STATUTE_SELECTION, selection_settings)
        super().__init__({"kind": "statute", "pipeline": pipeline, "retrieval": retrieval, "model": model},
                         token_counter)
        self.retrieve = StatuteRetriever(strategy=retrieval, data_dir=data_dir, no_citation="all")
        self.select = SelectExemplars(config, embedder=embedder)
        self.solve = make_statute_solver(pipeline)

    def _retrieved(self, example: Mapping) -> dict:
        question = example["question"]
        facts = "\n".join(example.get("paragraphs") or [])
        statute = self.retrieve(question=question).statute_text
        return {"question": question, "facts": facts, "statute": statute}


    def _select_fields(self, question, table, paragraphs) -> dict:
        return {"question": question}


def _selection(owner: str, config: SelectionConfig, settings: Mapping) -> SelectionConfig:
    """``config`` with ``settings`` in place; an unknown keyword is reported as ``owner``'s."""
    try:
        return config.with_settings(**settings)
    except SelectionConfigError as exc:
        raise SelectionConfigError(f"{owner}: {exc}") from None


def build_pipeline(dataset: str = "tatqa", pipeline: str = "pot", *, retrieval: str | None = None,
                   top_n_paragraphs: int | None = 3, **kwargs) -> _Pipeline:
    """The pipeline for a dataset: ``StatuteQA`` for SARA (``retrieval``: its statute strategy, default
    mentioned_only), ``DocumentQA`` otherwise (``top_n_paragraphs``; FinQA: ``pot`` uses the FinQA DSL). Other
    keywords go to the pipeline (``selection=``, selection settings, ``model``, ``embedder``, ...)."""
    if dataset == "sara":
        return StatuteQA(pipeline=pipeline, retrieval=retrieval or "mentioned_only", **kwargs)
    if dataset in ("finqa", "finqa_cases") and pipeline == "pot":
        pipeline = "finqa_pot"
    return DocumentQA(pipeline=pipeline, top_n_paragraphs=top_n_paragraphs, **kwargs)


def save_program(program: _Pipeline, path: str | Path) -> Path:
    """Write the program JSON and its compile report beside it (``x.json`` + ``x.report.json``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.json")  # written whole, then renamed: no torn program files
    program.save(str(tmp))
    tmp.replace(path)
    report = getattr(program, "compile_report", None) or program.select.compile_report
    path.with_suffix(".report.json").write_text(json.dumps(report, indent=2, default=str))
    return path


def load_program(path: str | Path, embedder=None, token_counter=None) -> _Pipeline:
    """Rebuild the pipeline recorded in the program JSON and load its compiled state."""
    path = Path(path)
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a program JSON ({exc})") from None
    spec = state.get("spec") if isinstance(state, dict) else None
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError("no pipeline spec in this JSON (was it written by 'kdspy compile' / save_program?)")
    spec = spec_of_state(spec)
    kind = spec.pop("kind")
    cls = StatuteQA if kind == "statute" else DocumentQA
    program = cls(embedder=embedder, token_counter=token_counter, **spec)
    program.load(str(path))
    program.compile_report = program.select.compile_report
    return program


__all__ = ["DocumentQA", "PipelineSpec", "StatuteQA", "build_pipeline", "load_program", "save_program"]
