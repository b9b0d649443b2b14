"""Ready-made pipelines: Retrieve -> solver, ordinary DSPy programs compiled by ``KnapsackFewShot``, and saving /
loading compiled programs.

``DocumentQA`` (TAT-QA, FinQA): ``HybridRetriever`` keeps the table as a table and the paragraphs most
similar to the question; the solver answers (program of thought: the LM writes a program we execute; chain of
thought; few-shot; zero-shot). ``StatuteQA`` (SARA): ``StatuteRetriever`` picks statute text by the question's
citation; the statute answerer gives Entailment / Contradiction or a dollar amount.

Compiled with ``KnapsackFewShot``, the solver's demo predictor (``demo_predictor_name``: ``solve.write``, the
program writer, or ``solve.answer``) becomes a ``SelectingPredict`` choosing its exemplars per question. The
pipelines offer the compile hooks: ``demo_for`` (a pool example as that predictor's demo, its context retrieved
as a query's is), ``inputs_for`` (a query's inputs to it), ``selection_config`` (their ``SelectionConfig``),
``embedder`` (shared by retrieval and selection) and ``prefetch_embeddings``; ``forward`` tells the predictor
the question's id, document and gold attributes (``selection_hints``) and returns what it selected
(``exemplar_ids``, ``selection``). A program repair is the writer's conversation continued
(``solvers/repair_turn.py``): it re-sends the writer's demos and has no pool of its own.

``evidence_selection="knapsack"`` (beside today's fixed rules, ``"rules"``, the default): a query's document
goes to the compiled demo predictor as pieces -- TAT-QA's and FinQA's table rows and paragraphs, SARA's statute
subsections (``selectable_evidence.py``) -- and the predictor chooses per call its demos and the pieces to show in
one knapsack (docs/core.md, "Selectable context"; docs/retrieval.md, "Selectable evidence"). Demos are as with the
rules.

They carry their own construction spec in the saved JSON, so ``load_program(path)`` rebuilds the right
pipeline before loading its state (spec version 3: the selection is in the demo predictor's state; version-2
programs, with a separate ``select`` module, still load: ``saved_format``).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import dspy

from knapsack_dspy.disk_memo import DiskMemo
from knapsack_dspy.docqa.data.example_fields import DOCUMENT_ATTRIBUTES
from knapsack_dspy.docqa.data.program_evidence import demo_evidence
from knapsack_dspy.docqa.data.tatqa_evidence import context_rows, evidence_sentences, tatqa_demo_evidence
from knapsack_dspy.docqa.metrics.selection_proxies import selection_proxies
from knapsack_dspy.docqa.pipelines.answer_type_router import EXTRACT_TYPES, AnswerTypeRouter
from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever
from knapsack_dspy.docqa.pipelines.pipeline_names import (
    DOCUMENT_PIPELINES,
    EXTRACT_ROUTE,
    PROGRAM_PIPELINES,
    ROUTINGS,
    STATUTE_PIPELINES,
)
from knapsack_dspy.docqa.pipelines.pipeline_spec import PipelineSpec, compiled_token_counter
from knapsack_dspy.docqa.pipelines.pool_attributes import pool_attribute_functions
from knapsack_dspy.docqa.pipelines.program_qa import ProgramQA
from knapsack_dspy.docqa.pipelines.selectable_evidence import (
    MAX_OFFERED_PIECES,
    OfferedDocument,
    evidence_problem,
    offered_document,
    shown_document,
    statute_pieces,
)
from knapsack_dspy.docqa.pipelines.statute_retriever import StatuteRetriever
from knapsack_dspy.docqa.retrieval.table_rows import row_text
from knapsack_dspy.docqa.solvers import make_document_solver, make_statute_solver
from knapsack_dspy.docqa.solvers.document_pieces import SELECTABLE
from knapsack_dspy.docqa.solvers.extract_answerer import ExtractAnswerer
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm.default_model import DEFAULT_LOCAL_MODEL
from knapsack_dspy.memo import BoundedMemo
from knapsack_dspy.modules.compiled_programs import load_compiled, read_program_state, save_pool_stores
from knapsack_dspy.modules.select_exemplars import NotCompiledError, SelectExemplars, query_text
from knapsack_dspy.modules.selectable_context import Pieces
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.saved_format import pipeline_spec_arguments, select_module_moved
from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.pool_store import searching, stores_beside

#: What a TAT-QA demo's table shows: ``"all"`` (as a query's table) or ``"gold_rows"`` (its header rows, the rows
#: its gold solution reads and their context up to ``demo_table_rows`` body rows: ``DocumentQA._demo_retrieved``).
DEMO_TABLES = ("all", "gold_rows")
#: Which paragraphs a demo shows: as a query's retrieval keeps them (``"all"``) or only its gold evidence.
DEMO_PARAGRAPHS = ("all", "gold")
#: The body rows a ``"gold_rows"`` demo table shows at most, unless its evidence rows and their headings need more.
DEFAULT_DEMO_TABLE_ROWS = 4
#: What the pipelines embed for selection unless told otherwise: the question (not the retrieved document).
PIPELINE_EMBED_FIELDS = ("question",)
#: StatuteQA's selection unless told otherwise: two nearest statutes' cases, no attribute templates.
STATUTE_SELECTION = SelectionConfig(selector="kate", max_exemplars=2, attributes=())
_rendered_demos = BoundedMemo(50_000)  # DocumentQA.render_demo results, keyed on the pipeline and the example
_rendered_demos_on_disk = DiskMemo("rendered_demos")  # the same across processes (a warm compile renders nothing)
_query_inputs = BoundedMemo(50_000)  # DocumentQA.inputs_for results, keyed as the rendered demos
_query_inputs_on_disk = DiskMemo("query_inputs")  # the same across processes (a warm compile retrieves nothing)
_NO_SELECTION = {"ids": [], "within_budget": True}  # what a call without selected demos reports


class _Pipeline(dspy.Module):
    """Shared plumbing: the compile hooks, the selection hints, the selection of one example."""

    def __init__(self, spec: dict, selection: SelectionConfig, embedder, token_counter=None):
        super().__init__()
        evidence = spec.get("evidence_selection", "rules")
        problem = evidence_problem(evidence, str(spec.get("pipeline")))
        if problem:
            raise ValueError(problem)
        if evidence == "rules":  # specs of programs with today's rules stay as they were
            spec = {k: v for k, v in spec.items() if k != "evidence_selection"}
        self.spec = PipelineSpec(**spec)
        self.embedder = embedder
        self._selection_config = selection
        self._token_counter = token_counter

    @property
    def model(self) -> str:
        return self.spec.spec.get("model") or DEFAULT_LOCAL_MODEL

    @property
    def token_counter(self):
        """The target model's token counter (given, or the model's: the one the program was compiled for)."""
        return compiled_token_counter(self)

    @property
    def uses_demos(self) -> bool:
        return self.spec.spec.get("pipeline") != "zero_shot"

    @property
    def evidence_selection(self) -> str:
        """How a query's evidence is chosen: ``"rules"`` (today's fixed rules) or ``"knapsack"`` (with the demos)."""
        return self.spec.spec.get("evidence_selection", "rules")

    # -- the demo predictors and their selections ----------------------------------------------------------
    def demo_solvers(self) -> dict:
        """Solver modules whose predictor takes demos, by the name of their ``predict`` in the solver: the
        solver (``solve``), and with routing the extractor (``extract``)."""
        return {"solve": self.solve}

    def _predictor_name(self, solver) -> str:
        target = solver.predictor
        return next(name for name, predictor in self.named_predictors() if predictor is target)

    @property
    def demo_predictor_name(self) -> str:
        """The name (``named_predictors``) of the predictor whose prompt the demos go into (the main solver's)."""
        return self._predictor_name(self.solve)

    def demo_predictor_of_route(self, route: str | None) -> str:
        """The demo predictor a question that took ``route`` drew its exemplars from (the main solver's)."""
        return self.demo_predictor_name

    def _solver_of(self, predictor_name: str):
        """The demo solver whose predictor is ``predictor_name`` (None: not a demo predictor)."""
        return next((solver for solver in self.demo_solvers().values()
                     if self._predictor_name(solver) == predictor_name), None)

    def _selecting(self, solver=None) -> SelectingPredict | None:
        predictor = (solver or self.solve).predictor
        return predictor if isinstance(predictor, SelectingPredict) else None

    @property
    def select(self) -> SelectExemplars:
        """The main demo predictor's ``SelectExemplars`` (pool, settings, compile report): compiled programs only."""
        return self.selection_of(self.demo_predictor_name)

    def selection_of(self, predictor_name: str) -> SelectExemplars:
        """The ``SelectExemplars`` of a demo predictor (by name): compiled programs only."""
        solver = self._solver_of(predictor_name)
        compiled = self._selecting(solver) if solver is not None else None
        if compiled is None:
            raise NotCompiledError(f"{type(self).__name__}: {predictor_name!r} is not compiled (or not a demo "
                                   "predictor): run KnapsackFewShot.compile or load_program first")
        return compiled.selection

    @property
    def selection_settings(self) -> SelectionConfig:
        """The selection settings in use: the compiled ones, else those the pipeline was built with."""
        compiled = self._selecting()
        return compiled.selection.config if compiled else self.selection_config(self.demo_predictor_name)

    # -- compile hooks (KnapsackFewShot; the protocol compile_hooks.CompileHooks) ------------------------
    #: Demo fields questions of one document share (shown once per prompt) unless the config says otherwise.
    shared_fields: tuple[str, ...] = ()

    def selection_config(self, predictor_name: str) -> SelectionConfig | None:
        """A demo predictor's settings (the question embedded, the pipeline's ``shared_fields`` shared, unless the
        config says otherwise); none for the other predictors."""
        if self._solver_of(predictor_name) is None:
            return None
        config = self._selection_config
        if config.embed_fields is None:
            config = config.with_settings(embed_fields=PIPELINE_EMBED_FIELDS)
        if config.shared_fields is None:
            config = config.with_settings(shared_fields=self.shared_fields)
        return config

    def pool_attributes(self, predictor_name: str) -> dict:
        """The labels of the pool's exemplars: modality, answer type, kind and solution (``pool_attributes``)."""
        return pool_attribute_functions()

    def selection_proxies(self, rows, select) -> dict:
        """The document-QA proxies: attribute match and the similarity of the exemplars' programs to the query's."""
        return selection_proxies(rows, select, attributes=select.config.attributes)

    def demo_for(self, predictor_name: str, example):
        """A pool example as a demo predictor's demo (None: not in its pool); the other predictors get no pool."""
        solver = self._solver_of(predictor_name)
        if solver is None or not self._in_pool_of(solver, example):
            return None
        return dspy.Example(**self.render_demo(example, solver))

    def _in_pool_of(self, solver, example) -> bool:
        """Whether a pool example can be a demo of ``solver`` (all of them, unless a route says otherwise)."""
        return True

    def inputs_for(self, predictor_name: str, example) -> dict | None:
        solver = self._solver_of(predictor_name)
        return self.prompt_inputs(example, solver) if solver is not None else None

    def render_demo(self, example, solver=None) -> dict:
        """A pool example in a solver's demo fields (default: the main solver), its context retrieved as a query's
        is (FinQA documents: cut down to their evidence, ``DocumentQA._demo_retrieved``)."""
        solver = solver or self.solve
        return dict(solver.as_demo(dspy.Example(**{**dict(example), **self._demo_retrieved(example)})))

    def _demo_retrieved(self, example: Mapping) -> dict:
        return self._retrieved(example)

    def prompt_inputs(self, example, solver=None) -> dict:
        """A query's inputs to a solver's predictor (with selectable evidence, its pieces)."""
        return dict((solver or self.solve).prompt_inputs(self._query_retrieved(example)))

    def _query_retrieved(self, example: Mapping) -> dict:
        """What a query's prompt is given: today's rules (``_retrieved``), or with ``evidence_selection="knapsack"``
        the document offered as pieces (the pipeline's own)."""
        return self._retrieved(example)

    def _solver_query(self, example: Mapping, solver) -> dict:
        """The solver's keyword arguments for a query: its context (``_query_retrieved``), selectable only when the
        solver's predictor is compiled (a plain predictor shows the whole offered document)."""
        return dict(self._query_retrieved(example))

    def prefetch_embeddings(self, examples, progress: bool = False) -> int:
        """Embed, in one batch, every text that retrieval and selection will embed for ``examples`` (they are
        then served from the embedding cache). One large length-sorted batch is many times faster than the
        per-example calls (measured: 150 TAT-QA questions, 140 s per example vs 7 s batched, cold cache).
        Returns the number of distinct texts; a no-op without an embedding cache."""
        embedder = self.embedder
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
        fields = self._select_fields(example["question"], example.get("table"), example.get("paragraphs"))
        return [query_text(fields, self.selection_settings.embed_fields or PIPELINE_EMBED_FIELDS)]

    # -- shared inference ------------------------------------------------------------------------------
    def _select_fields(self, question, table, paragraphs) -> dict:
        """The query's raw fields selection may read (LM attribute prediction reads the document)."""
        return {"question": question, "table": table, "paragraphs": paragraphs}

    def _hints(self, question, table, paragraphs, id, doc_id, attributes: Mapping):
        known = set(self.selection_settings.attributes)
        unknown = sorted(set(attributes) - known)
        if unknown:  # e.g. tables=[...] for table=[...]: answering without the table would be silently wrong
            raise TypeError(f"{type(self).__name__}() got unexpected keyword {', '.join(map(repr, unknown))}; it takes "
                            "question, table, paragraphs, id, doc_id"
                            + (f" and gold values of {', '.join(sorted(known))}" if known else ""))
        return selection_hints(id=id, doc_id=doc_id, attributes=attributes,
                               fields=self._select_fields(question, table, paragraphs))

    def example_inputs(self, example) -> dict:
        """What the bench passes to ``forward`` for an example (inputs + ids + gold attributes for oracles)."""
        inputs = {k: example.get(k) for k in ("question", "table", "paragraphs")}
        inputs.update(id=example.get("id"), doc_id=example.get("doc_id"))
        inputs.update(self._gold_attributes(example))
        return inputs

    def _gold_attributes(self, example) -> dict:
        """The example's gold attribute values when selection aims at them (oracle runs), else nothing."""
        settings = self.selection_settings
        if settings.resolved_attribute_source != "gold":
            return {}
        return {a: example.get(a) for a in settings.attributes}

    def _route(self, question: str) -> tuple:
        """(the solver that answers ``question``, route information for the prediction): the main solver."""
        return self.solve, {}

    def select_for(self, example) -> dict:
        """Selection only (no LM): the selection info for one example (of the solver it is routed to)."""
        solver, route = self._route(example["question"])
        compiled = self._selecting(solver)
        if compiled is None:
            raise NotCompiledError(f"{type(self).__name__} is not compiled: nothing selects its demos")
        inputs = solver.prompt_inputs(self._query_retrieved(example))
        with self._hints(example["question"], example.get("table"), example.get("paragraphs"), example.get("id"),
                         example.get("doc_id"), self._gold_attributes(example)):
            return {**compiled.select_demos(**inputs).info, **route}

    def forward(self, question: str, table=None, paragraphs=None, id: str | None = None, doc_id: str | None = None,
                **attributes):
        solver, route = self._route(question)
        query = self._solver_query({"question": question, "table": table, "paragraphs": paragraphs}, solver)
        extra = self._solver_extras(solver, route, paragraphs)
        with self._hints(question, table, paragraphs, id, doc_id, attributes), selection_log() as selected:
            pred = solver(**query, demos=None if self.uses_demos else [], **extra)
        return self._with_selection(pred, selected, route)

    async def aforward(self, question: str, table=None, paragraphs=None, id: str | None = None,
                       doc_id: str | None = None, **attributes):
        """``forward`` for ``await program.acall(...)``: retrieval and routing (CPU: embeddings) in a worker
        thread, the LM through DSPy's async path."""
        def prepare():
            solver, route = self._route(question)
            return self._solver_query({"question": question, "table": table, "paragraphs": paragraphs},
                                      solver), (solver, route)

        query, (solver, route) = await asyncio.to_thread(prepare)
        extra = self._solver_extras(solver, route, paragraphs)
        with self._hints(question, table, paragraphs, id, doc_id, attributes), selection_log() as selected:
            pred = await solver.acall(**query, demos=None if self.uses_demos else [], **extra)
        return self._with_selection(pred, selected, route)

    @staticmethod
    def _solver_extras(solver, route, paragraphs) -> dict:
        """Inputs a solver takes besides the prompt's: the routed answer type for the extractor (it reads
        "multi-span" as "a list is expected"; a program's answer shows its kind), and the whole document's
        paragraphs for solvers whose scale rule reads the document's units (a unit is often stated once, in a
        paragraph retrieval leaves out; the prompt is unchanged)."""
        extra = {"answer_type": route["routed_answer_type"]} if route.get("route") == EXTRACT_ROUTE else {}
        if getattr(solver, "reads_units", False) and paragraphs is not None and not isinstance(paragraphs, str):
            extra["unit_paragraphs"] = [str(p) for p in paragraphs]
        return extra

    @staticmethod
    def _with_selection(pred, selected, route) -> dspy.Prediction:
        """The solver's prediction with what its demo predictor selected (its first call: the writer) and the
        route it took."""
        selection = selected[0].info if selected else dict(_NO_SELECTION)
        return dspy.Prediction(**dict(pred), exemplar_ids=selection.get("ids", []), selection=selection, **route)

    def __deepcopy__(self, memo):
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        embedder = self.__dict__.get("embedder")
        if embedder is not None:
            memo.setdefault(id(embedder), embedder)  # one embedder (and its cache) for every part of the copy
        for key, value in self.__dict__.items():
            if key in ("_token_counter", "embedder", "_selection_config"):
                setattr(clone, key, value)  # shared: tokenizer handles are process-wide; settings are frozen
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        return clone


class DocumentQA(_Pipeline):
    """Questions over a table + text; demos of one document show its table once per prompt (``shared_fields``).
    ``pipeline``: pot (Python program, SEER style; for FinQA the DSL), python_pot (a Python program for any data
    set, FinQA included), finqa_pot (FinQA DSL),
    cot (reasoning then answer), few_shot (answer directly, with demos), zero_shot (no demos).

    ``selection``: the ``SelectionConfig`` (default: ``SelectionConfig(attributes=DOCUMENT_ATTRIBUTES)``, SEER's
    modality); keyword arguments replace single settings of it (``selector="kate"``, ``max_exemplars=2``, ...);
    any other keyword is an error.
    ``samples`` / ``temperature``: self-consistency for the program pipelines (``ProgramOfThoughtAnswerer``);
    saved with the program when ``samples > 1``. ``conventions``: the answer rules a Python program writer's
    instructions state (``ProgramOfThoughtAnswerer``: ``"finqa"`` for FinQA questions, which ``build_pipeline``
    sets; ``None``: the solver's default); saved with the program when given.
    ``demo_table`` / ``demo_table_rows`` / ``demo_paragraphs``: what a demo of a TAT-QA record shows (the query's
    own document is never cut; FinQA demos are always cut to their evidence): ``demo_table="gold_rows"`` cuts
    its table to the header rows, the rows its gold solution reads (``data.tatqa_evidence``), their section
    headings and the nearest rows up to ``demo_table_rows`` body rows, and its paragraphs to its evidence
    paragraphs plus the most similar ones up to ``top_n_paragraphs``; ``demo_paragraphs="gold"`` shows its
    evidence paragraphs only. Saved with the program when not ``"all"``.
    ``evidence_selection``: how a query's evidence is chosen: ``"rules"`` (the default: ``HybridRetriever``'s fixed
    rules, the top ``top_n_paragraphs`` paragraphs and the whole table unless it is long) or ``"knapsack"`` (every
    data row and paragraph offered as pieces -- the most similar ``MAX_OFFERED_PIECES`` of a longer document --, and
    the compiled demo predictors choose per call the demos and the pieces to show in one knapsack:
    ``selectable_evidence.py``, ``solvers/document_pieces.py``); demos are the same either way. Saved with the
    program when not ``"rules"``."""

    shared_fields = ("table",)

    def __init__(self, pipeline: str = "pot", top_n_paragraphs: int | None = 3, model: str | None = None,
                 embedder=None, token_counter=None, selection: SelectionConfig | None = None, route: str | None = None,
                 samples: int = 1, temperature: float | None = None, conventions: str | None = None,
                 demo_table: str = "all", demo_table_rows: int = DEFAULT_DEMO_TABLE_ROWS, demo_paragraphs: str = "all",
                 evidence_selection: str = "rules", **selection_settings):
        if pipeline not in DOCUMENT_PIPELINES:
            raise ValueError(f"unknown pipeline {pipeline!r} for table + text data; choose from {DOCUMENT_PIPELINES}")
        if route not in ROUTINGS:
            raise ValueError(f"route must be one of {ROUTINGS}, got {route!r}")
        if route is not None and pipeline not in PROGRAM_PIPELINES:
            raise ValueError(f"route={route!r} routes between extraction and a program: pipeline one of "
                             f"{PROGRAM_PIPELINES}")
        if samples != 1 and pipeline not in PROGRAM_PIPELINES:
            raise ValueError(f"samples={samples!r}: self-consistency votes over executed programs; pipeline "
                             f"{pipeline!r} writes none (use one of {PROGRAM_PIPELINES})")
        if conventions is not None and pipeline not in PROGRAM_PIPELINES:
            raise ValueError(f"conventions={conventions!r} are a program writer's; pipeline {pipeline!r} writes "
                             f"none (use one of {PROGRAM_PIPELINES})")
        if demo_table not in DEMO_TABLES:
            raise ValueError(f"demo_table must be one of {DEMO_TABLES}, got {demo_table!r}")
        if demo_paragraphs not in DEMO_PARAGRAPHS:
            raise ValueError(f"demo_paragraphs must be one of {DEMO_PARAGRAPHS}, got {demo_paragraphs!r}")
        if isinstance(demo_table_rows, bool) or not isinstance(demo_table_rows, int) or demo_table_rows < 0:
            raise ValueError(f"demo_table_rows must be an integer >= 0, got {demo_table_rows!r}")
        config = _selection(type(self).__name__, selection or SelectionConfig(attributes=DOCUMENT_ATTRIBUTES),
                            selection_settings)
        sampling = {"samples": samples, "temperature": temperature} if samples != 1 else {}
        embedder = embedder or TextEmbedder()  # one embedder (and cache) for retrieval and selection
        spec = {"kind": "document", "pipeline": pipeline, "top_n_paragraphs": top_n_paragraphs, "model": model}
        if route is not None:  # specs of unrouted programs stay as they were
            spec["route"] = route
        spec.update(sampling)  # so do specs of programs without self-consistency
        rules = {"conventions": conventions} if conventions is not None else {}
        spec.update(rules)  # and of programs with the solver's default answer rules
        if demo_table != "all":  # and those of programs whose demos show what a query's retrieval keeps
            spec.update(demo_table=demo_table, demo_table_rows=demo_table_rows)
        if demo_paragraphs != "all":
            spec["demo_paragraphs"] = demo_paragraphs
        spec["evidence_selection"] = evidence_selection  # left out at "rules" (_Pipeline: old specs unchanged)
        super().__init__(spec, config, embedder, token_counter)
        self.retrieve = HybridRetriever(top_n_paragraphs=top_n_paragraphs, embedder=embedder)
        self.solve = make_document_solver(pipeline, **sampling, **rules)
        if route == "extract_compute":
            self.extract = ExtractAnswerer()
            self.router = AnswerTypeRouter()

    @property
    def route(self) -> str | None:
        return self.spec.spec.get("route")

    @property
    def demo_cut(self) -> dict:
        """How demos are cut when not as a query's document is (``demo_table`` / ``demo_paragraphs``; ``{}``: not)."""
        return {k: self.spec.spec[k] for k in ("demo_table", "demo_table_rows", "demo_paragraphs")
                if k in self.spec.spec}

    def demo_solvers(self) -> dict:
        return {"solve": self.solve, "extract": self.extract} if self.route else {"solve": self.solve}

    def demo_predictor_of_route(self, route: str | None) -> str:
        """The demo predictor a question that took ``route`` drew its exemplars from: with routing, the extractor's
        for the extract route; the program writer's otherwise."""
        if self.route and route == EXTRACT_ROUTE:
            return self._predictor_name(self.extract)
        return self.demo_predictor_name

    def _in_pool_of(self, solver, example) -> bool:
        """With routing, the extractor's pool holds the span questions; the program writer's holds every question
        (a question routed to it by mistake still finds demos of its kind)."""
        return solver is not self.__dict__.get("extract") or example.get("answer_type") in EXTRACT_TYPES

    def prompt_group(self, example) -> str:
        """What opens this example's prompt (the bench orders questions by it so consecutive prompts share a
        prefix): its route ("" unrouted)."""
        return self._route(example["question"])[1].get("route", "")

    def _route(self, question: str) -> tuple:
        if not self.route:
            return self.solve, {}
        decision = self.router.route(question, self.embedder.encode([question])[0])
        solver = self.extract if decision.route == EXTRACT_ROUTE else self.solve
        return solver, {"route": decision.route, "routed_answer_type": decision.answer_type,
                        "p_extract": round(decision.p_extract, 4)}

    def render_demo(self, example, solver=None) -> dict:
        """As ``_Pipeline.render_demo``, remembered per process and on disk (``disk_memo``, valid for this code):
        a benchmark suite compiles the same pool once per selector, every compile of a pool renders it, and
        rendering a demo (retrieval, gold-program synthesis, its checks and execution) costs ~10 ms. A demo
        depends on the solver (``pipeline``, or the extractor), the retrieval settings and the embedder, not on
        the selector."""
        solver = solver or self.solve
        key = self._memo_key(solver, example, [self.demo_cut] if self.demo_cut else [])
        if key is None:
            return super().render_demo(example, solver)
        return copy.deepcopy(_rendered_demos.get_or_compute(key, lambda: _rendered_demos_on_disk.get_or_compute(
            key, lambda: super(DocumentQA, self).render_demo(example, solver))))

    def inputs_for(self, predictor_name: str, example) -> dict | None:
        """As ``_Pipeline.inputs_for``, remembered per process and on disk as ``render_demo`` is: a compile reads
        every pool example's inputs as a query gives them (a demo cut to its evidence differs from them;
        ``SelectExemplars.same_inputs_ids``), and a suite compiles the same pool once per selector."""
        solver = self._solver_of(predictor_name)
        evidence = [] if self.evidence_selection == "rules" else [self.evidence_selection, MAX_OFFERED_PIECES]
        key = None if solver is None else self._memo_key(solver, example, ["query inputs", *evidence])
        if key is None:
            return super().inputs_for(predictor_name, example)
        return copy.deepcopy(_query_inputs.get_or_compute(key, lambda: _query_inputs_on_disk.get_or_compute(
            key, lambda: super(DocumentQA, self).inputs_for(predictor_name, example))))

    def _memo_key(self, solver, example, extra: list) -> str | None:
        """What a rendering of ``example`` for ``solver`` depends on, hashed (with ``extra``); ``None``: nothing to
        key on (an embedder that does not say which model it is, an example that is not JSON)."""
        model_id = getattr(self.embedder, "model_id", None)
        if model_id is None:
            return None
        kind = type(solver).__qualname__ if solver is not self.solve else self.spec.spec["pipeline"]
        try:
            return hashlib.sha256(json.dumps(
                [type(self).__qualname__, kind, self.retrieve.top_n_paragraphs,
                 self.retrieve.max_table_rows, model_id, dict(example), *extra],
                sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
        except (TypeError, ValueError):
            return None

    def _texts_to_embed(self, example) -> list[str]:
        texts = [*super()._texts_to_embed(example),
                 *self.retrieve.texts_to_embed(example["question"], example.get("table"), example.get("paragraphs"))]
        if self.evidence_selection != "rules":  # the pieces' relevance to the question
            texts += [example["question"], *(row_text([str(c) for c in row]) for row in example.get("table") or []),
                      *(str(p) for p in example.get("paragraphs") or [])]
        return texts

    def _retrieved(self, example: Mapping) -> dict:
        question = example["question"]
        table = list(example.get("table") or [])
        paragraphs = list(example.get("paragraphs") or [])
        ctx = self.retrieve(question=question, table=table, paragraphs=paragraphs)
        return {"question": question, "table": [table[i] for i in ctx.row_ids],
                "paragraphs": [paragraphs[i] for i in ctx.paragraph_ids]}

    def offered(self, example: Mapping) -> OfferedDocument:
        """The rows and paragraphs a query offers as pieces (``selectable_evidence.offered_document``: all of them,
        the most similar ``MAX_OFFERED_PIECES`` of a longer document)."""
        question = example["question"]
        return offered_document(list(example.get("table") or []), list(example.get("paragraphs") or []),
                                lambda texts: self.retrieve.similarities(question, texts))

    def _query_retrieved(self, example: Mapping) -> dict:
        if self.evidence_selection == "rules":
            return self._retrieved(example)
        table = list(example.get("table") or [])
        paragraphs = list(example.get("paragraphs") or [])
        offered = self.offered(example)
        return {"question": example["question"], "table": [table[i] for i in offered.row_ids],
                "paragraphs": [paragraphs[i] for i in offered.paragraph_ids], SELECTABLE: True}

    def _solver_query(self, example: Mapping, solver) -> dict:
        query = dict(self._query_retrieved(example))
        if query.pop(SELECTABLE, False) and self._selecting(solver) is not None:
            query["selectable"] = True  # the solver hands the document to its selecting predictor as pieces
        return query

    def evidence_shown(self, example: Mapping, selection: Mapping | None = None) -> tuple[list[int], list[int]]:
        """(row ids, paragraph ids) of the query's document its prompt shows, ascending: with the rules, what the
        retriever keeps; with the knapsack, the header rows and the rows and paragraphs the selection kept
        (``selection``: the selection info, ``select_for``'s or a prediction's; ``None``: every piece offered)."""
        table = list(example.get("table") or [])
        if self.evidence_selection == "rules":
            ctx = self.retrieve(question=example["question"], table=table,
                                paragraphs=list(example.get("paragraphs") or []))
            return list(ctx.row_ids), list(ctx.paragraph_ids)
        return shown_document(self.offered(example), table, (selection or {}).get("pieces"))

    def _demo_retrieved(self, example: Mapping) -> dict:
        """A FinQA document record as a demo shows it (documents average ~600 words): the header rows and the
        rows its gold program reads (``gold_inds`` when given, else found from the program's numbers:
        ``knapsack_dspy.docqa.data.program_evidence``), the sentences its program reads plus the sentences most
        similar to the question up to ``top_n_paragraphs``. A TAT-QA record with ``demo_table="gold_rows"``: cut
        the same way, to the rows its gold solution reads (``knapsack_dspy.docqa.data.tatqa_evidence``) with
        their context up to ``demo_table_rows`` body rows (when they cannot be told: the rows a query's
        retrieval keeps) and its evidence paragraphs. ``demo_paragraphs="gold"``: the evidence paragraphs only.
        Other records: as a query's retrieval keeps them."""
        cut = self.demo_cut
        evidence = demo_evidence(example)
        trim_table = evidence is None and cut.get("demo_table") == "gold_rows"
        if trim_table:
            evidence = tatqa_demo_evidence(example)
        question = example["question"]
        paragraphs = list(example.get("paragraphs") or [])
        if evidence is None:
            shown = self._retrieved(example)
            if cut.get("demo_paragraphs") == "gold" and example.get("gold_evidence"):
                shown["paragraphs"] = [paragraphs[i] for i in evidence_sentences(example) if i < len(paragraphs)]
            return shown
        table = list(example.get("table") or [])
        rows, sentences = evidence
        if trim_table:  # TAT-QA: the rows read and their context; unknown rows: as a query's table
            rows = (self.retrieve.select_rows(question, table) if rows is None
                    else context_rows(table, rows, cut["demo_table_rows"]))
        row_ids, paragraph_ids = self.retrieve.evidence_context(question, table, paragraphs, rows, sentences)
        if cut.get("demo_paragraphs") == "gold":
            paragraph_ids = [i for i in paragraph_ids if i in set(sentences)]
        return {"question": question, "table": [table[i] for i in row_ids],
                "paragraphs": [paragraphs[i] for i in paragraph_ids]}


class StatuteQA(_Pipeline):
    """SARA: statute retrieval by the question's citation (``retrieval`` strategy), then the answerer.

    ``selection``: the ``SelectionConfig`` (default: ``STATUTE_SELECTION``, KATE with two exemplars); keyword
    arguments replace single settings of it; any other keyword is an error. ``statute_tokens``: the most tokens of
    statute text in a query or a demo (``None``: no limit), counted with the target model's tokenizer and cut by
    the hierarchy (``retrieval.statute_budget``): a question that cites nothing gets every statute (~7,000 tokens
    for SARA's numerical cases), more than the embedded models' 4,096-token context (docs/retrieval.md).
    ``evidence_selection="knapsack"``: the statute text the strategy picks (before any ``statute_tokens`` cut) goes
    to the compiled predictor as pieces -- one per subsection, its section's title line their shared fixed part
    (``selectable_evidence.statute_pieces``) -- chosen per call with the demos in one knapsack; demos as with the
    rules (``"rules"``, the default). Saved with the program when not ``"rules"``."""

    def __init__(self, pipeline: str = "cot", retrieval: str = "mentioned_only", model: str | None = None,
                 embedder=None, token_counter=None, data_dir=None, selection: SelectionConfig | None = None,
                 statute_tokens: int | None = None, evidence_selection: str = "rules", **selection_settings):
        if pipeline not in STATUTE_PIPELINES:
            raise ValueError(f"unknown pipeline {pipeline!r} for statutes; choose from {STATUTE_PIPELINES}")
        config = _selection(type(self).__name__, selection or STATUTE_SELECTION, selection_settings)
        spec = {"kind": "statute", "pipeline": pipeline, "retrieval": retrieval, "model": model}
        if statute_tokens is not None:  # specs of programs without a statute budget stay as they were
            spec["statute_tokens"] = statute_tokens
        spec["evidence_selection"] = evidence_selection  # left out at "rules" (_Pipeline: old specs unchanged)
        super().__init__(spec, config, embedder or TextEmbedder(), token_counter)
        self.retrieve = StatuteRetriever(strategy=retrieval, data_dir=data_dir, no_citation="all",
                                         max_tokens=statute_tokens)
        self.solve = make_statute_solver(pipeline)

    def _retrieved(self, example: Mapping) -> dict:
        question = example["question"]
        facts = "\n".join(example.get("paragraphs") or [])
        count = self.token_counter.count_text if self.retrieve.max_tokens is not None else None
        statute = self.retrieve(question=question, count_tokens=count).statute_text
        return {"question": question, "facts": facts, "statute": statute}

    def _query_retrieved(self, example: Mapping) -> dict:
        if self.evidence_selection == "rules":
            return self._retrieved(example)
        question = example["question"]
        picked = self.retrieve(question=question, uncut=True)  # the prompt's budget cuts it, not statute_tokens
        statute = statute_pieces(self.retrieve.corpus, picked.subsection_ids,
                                 lambda texts: self._similarities(question, texts))
        return {"question": question, "facts": "\n".join(example.get("paragraphs") or []), "statute": statute}

    def _solver_query(self, example: Mapping, solver) -> dict:
        query = dict(self._query_retrieved(example))
        if isinstance(query.get("statute"), Pieces) and self._selecting(solver) is None:
            query["statute"] = query["statute"].whole()  # a plain predictor shows every piece
        return query

    def _similarities(self, question: str, texts: list[str]):
        vectors = self.embedder.encode([question, *texts])
        return [float(v @ vectors[0]) for v in vectors[1:]]

    def _demo_retrieved(self, example: Mapping) -> dict:
        """A case as a demo shows it: as a query's retrieval keeps it, plus the rules its statement cites
        (``StatuteRetriever.cited_rules``), which a chain-of-thought demo's reasoning quotes."""
        return {**self._retrieved(example), "cited_rules": self.retrieve.cited_rules(example["question"])}

    def _select_fields(self, question, table, paragraphs) -> dict:
        return {"question": question}


def _selection(owner: str, config: SelectionConfig, settings: Mapping) -> SelectionConfig:
    """``config`` with ``settings`` in place; an unknown keyword is reported as ``owner``'s."""
    try:
        return config.with_settings(**settings)
    except SelectionConfigError as exc:
        raise SelectionConfigError(f"{owner}: {exc}") from None


def save_program(program: _Pipeline, path: str | Path) -> Path:
    """Write the program JSON and its compile report beside it (``x.json`` + ``x.report.json``), and the pool
    stores of its large pools in ``pools/`` beside it (``compiled_programs.save_pool_stores``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".partial.json")  # written whole, then renamed: no torn program files
    program.save(str(tmp))
    save_pool_stores(program, path)  # a large pool's store, beside the program (before the program is in place)
    tmp.replace(path)
    report = getattr(program, "compile_report", None) or {}
    path.with_suffix(".report.json").write_text(json.dumps(report, indent=2, default=str))
    return path


def load_program(path: str | Path, embedder=None, token_counter=None) -> _Pipeline:
    """Rebuild the pipeline recorded in the program JSON and load its compiled state (pool stores: looked for in
    the ``pools/`` folder beside it first)."""
    with searching(stores_beside(path)):
        return program_from_state(read_program_state(path), embedder=embedder, token_counter=token_counter)


def program_state_json(program: _Pipeline) -> str:
    """The program as the JSON text ``save_program`` writes (without the dependency metadata): how a compiled
    program travels to another process (``program_from_state(json.loads(text))``), never a pickle."""
    return json.dumps(program.dump_state(), ensure_ascii=False)


def program_from_state(state: Mapping, embedder=None, token_counter=None) -> _Pipeline:
    """The pipeline a saved program state describes (``read_program_state`` / ``program_state_json``), loaded."""
    state = dict(state)
    spec = state.get("spec")
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError("no pipeline spec in this JSON (was it written by 'kdspy compile' / save_program?)")
    version = spec.get("version")
    spec = pipeline_spec_arguments(spec)
    kind = spec.pop("kind")
    if kind == "program":  # a plain DSPy program (ProgramQA): no older layout
        program = ProgramQA(embedder=embedder, token_counter=token_counter, **spec)
        return load_compiled(program, state, embedder=program.embedder, token_counter=token_counter)
    cls = StatuteQA if kind == "statute" else DocumentQA
    program = cls(embedder=embedder, token_counter=token_counter, **spec)
    state = select_module_moved(state, version, program.demo_predictor_name)  # older layouts (saved_format)
    return load_compiled(program, state, embedder=program.embedder, token_counter=token_counter)


__all__ = ["DOCUMENT_PIPELINES", "STATUTE_PIPELINES", "DocumentQA", "PipelineSpec", "ProgramQA", "StatuteQA",
           "load_program", "program_from_state", "program_state_json", "save_program"]
