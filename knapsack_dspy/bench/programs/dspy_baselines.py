"""DSPy's own optimizers as bench baselines, beside our selectors: the comparison a DSPy user makes.

A suite selects them by name (``selector = ["seer", "dspy_knn", ...]``); the run's program (the same pipeline)
is compiled by DSPy's optimizer instead of ``KnapsackFewShot``:

- ``dspy_knn``: ``KNNFewShot(k=M)`` on each demo predictor (a routed pipeline has two: the program writer's and
  the extractor's), its trainset the pool in that predictor's fields (the demos our selectors choose from),
  embedded with the run's embedder (DSPy's KNN embeds every input field joined);
- ``dspy_labeled``: ``LabeledFewShot(k=M)`` on each demo predictor, the same trainset (M random demos for all);
- ``dspy_bootstrap``: ``BootstrapFewShot(max_bootstrapped_demos=4, max_labeled_demos=4)`` on the whole program, as
  DSPy's tutorials compile: the program itself is the teacher (LM: its traces on the pool, in order, kept where the
  dataset's correctness -- for GSM8K the final number, as ``dspy.datasets.gsm8k.gsm8k_metric`` scores it -- says
  right), its demos the traces plus labeled pool examples; M does not apply (DSPy's numbers, fixed);
- ``dspy_bootstrap_rs``: ``BootstrapFewShotWithRandomSearch`` on the whole program (LM: the traces come from
  running it), metric: the dataset's correctness;
- ``dspy_mipro0``: ``MIPROv2(max_bootstrapped_demos=0, max_labeled_demos=0)``: instructions only (LM; optuna).

A plain DSPy program (``ProgramQA``: a suite's ``pipeline = "cot:question -> answer"``) has no demo solvers: DSPy's
optimizer compiles the program itself, as a DSPy user would, with the pool in the program's fields
(``ProgramQA.trainset``: a GSM8K demo's reasoning is its worked solution).
A routed pipeline's router is fitted on the pool first, as ``KnapsackFewShot`` fits it (``fit_sub_modules``).
The first two need no LM, so selection-only runs support them. Their rows get the same budget accounting as
ours: the first prompt of the demo predictor the question is routed to is captured when it is formatted (a DSPy
callback), its tokens counted with the target model's tokenizer, its demos' ids read, and ``within_budget`` =
prompt + output reserve <= budget.
Without an LM (selection only) the program runs until that first LM call, which a stand-in LM refuses.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from dspy.clients.base_lm import BaseLM
from dspy.utils.callback import BaseCallback

from knapsack_dspy.bench.programs.thread_quiet import quiet_in_this_thread
from knapsack_dspy.bench.suites.baseline_names import DSPY_BASELINES
from knapsack_dspy.docqa.metrics.selection_proxies import PoolView
from knapsack_dspy.docqa.pipelines.program_qa import ProgramQA
from knapsack_dspy.llm.token_counter import token_count_kind
from knapsack_dspy.teleprompt.knapsack_few_shot import fit_sub_modules

__all__ = ["BaselineProgram", "compile_baseline"]

NO_ID = "(no id)"  # a demo without an id (a bootstrapped trace)
#: ``dspy_bootstrap``'s bootstrapped and labeled demos: the numbers DSPy's tutorials use (issue 50)
BOOTSTRAP_DEMOS = 4


class PredictorHolder(dspy.Module):
    """One predictor as a module (``.predict``, as ``ChainOfThought`` holds it): what ``KNNFewShot`` /
    ``LabeledFewShot`` compile when they must reach only the demo predictor of a larger program."""

    def __init__(self, predictor: dspy.Predict):
        super().__init__()
        self.predict = predictor

    def forward(self, **kwargs):
        return self.predict(**kwargs)

    async def aforward(self, **kwargs):
        return await self.predict.acall(**kwargs)


def _demo_trainset(student, predictor: dspy.Predict, pool: Sequence) -> list[dspy.Example]:
    """The pool in the demo predictor's fields (the demos our selectors choose from), with ids, inputs marked."""
    name = next(n for n, p in student.named_predictors() if p is predictor)
    inputs = list(predictor.signature.input_fields)
    out = []
    for ex in pool:
        demo = student.demo_for(name, ex)
        if demo is not None:
            out.append(dspy.Example(**dict(demo), id=ex.get("id"), doc_id=ex.get("doc_id")).with_inputs(*inputs))
    return out


def _demo_modules(program) -> list[dspy.Module]:
    """The sub-modules the demos go into, one per demo solver (``solve.write``; routed: also ``extract.answer``);
    a plain DSPy program's: the program (``ProgramQA.program``)."""
    if isinstance(program, ProgramQA):
        return [program.program]
    return [getattr(solver, solver.demo_module) for solver in program.demo_solvers().values()]


class _Quietly(dspy.Module):
    """``module`` with what it prints hidden: KNNFewShot runs BootstrapFewShot at every call, which prints a line
    and draws a progress bar. Only the calling thread's output is hidden (``quiet_in_this_thread``): the bench's
    workers answer in threads."""

    def __init__(self, module: dspy.Module):
        super().__init__()
        self.module = module
        if hasattr(module, "predict"):
            self.predict = module.predict

    def forward(self, **kwargs):
        with quiet_in_this_thread():
            return self.module(**kwargs)


def _labeled_or_knn(name: str, module: dspy.Module, trainset: list, max_exemplars: int, embedder) -> dspy.Module:
    """``module`` compiled by ``LabeledFewShot(k=M)`` or ``KNNFewShot(k=M)`` (labeled demos only: no LM) on
    ``trainset``, embedded with the run's embedder."""
    if name == "dspy_labeled":
        return dspy.LabeledFewShot(k=max_exemplars).compile(module, trainset=trainset)
    knn = dspy.KNNFewShot(k=max_exemplars, trainset=trainset, vectorizer=dspy.Embedder(
        lambda texts: embedder.encode(list(texts)), caching=False),
        max_bootstrapped_demos=0, max_labeled_demos=max_exemplars)
    return _Quietly(knn.compile(module))


def compile_baseline(name: str, student, pool: Sequence, valset: Sequence | None, *, max_exemplars: int,
                     embedder: Any, metric: Callable, seed: int = 0, num_threads: int = 1):
    """The run's ``student`` compiled by DSPy's optimizer ``name`` (see the module docstring)."""
    program = student.deepcopy()
    fit_sub_modules(program, list(pool), embedder)  # a routed pipeline's router learns the answer type
    if name in ("dspy_knn", "dspy_labeled") and isinstance(program, ProgramQA):
        # a plain DSPy program: compiled whole, as a DSPy user compiles it, with the pool in its fields
        program.program = _labeled_or_knn(name, program.program, program.trainset(pool), max_exemplars, embedder)
        return program
    if name in ("dspy_knn", "dspy_labeled"):
        for solver in program.demo_solvers().values():
            predictor = solver.predictor
            trainset = _demo_trainset(program, predictor, pool)
            if not trainset:  # nothing in this predictor's pool (e.g. no span question for the extractor)
                continue
            holder = _labeled_or_knn(name, PredictorHolder(predictor), trainset, max_exemplars, embedder)
            setattr(solver, solver.demo_module, holder)  # where the solver's demo predictor was
        return program
    trainset = program.trainset(pool) if isinstance(program, ProgramQA) else list(pool)
    val = program.trainset(valset or []) if isinstance(program, ProgramQA) else list(valset or [])
    if name == "dspy_bootstrap":
        optimizer = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=BOOTSTRAP_DEMOS,
                                          max_labeled_demos=BOOTSTRAP_DEMOS)
        with quiet_in_this_thread():  # its progress bar and summary line
            return optimizer.compile(program, trainset=trainset)
    if name == "dspy_bootstrap_rs":
        optimizer = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, max_bootstrapped_demos=max_exemplars, max_labeled_demos=max_exemplars,
            num_candidate_programs=4, num_threads=num_threads)
        return optimizer.compile(program, trainset=trainset, valset=val or None)
    if name == "dspy_mipro0":
        optimizer = dspy.MIPROv2(metric=metric, auto="light", max_bootstrapped_demos=0, max_labeled_demos=0,
                                 num_threads=num_threads, seed=seed, verbose=False)
        return optimizer.compile(program, trainset=trainset, valset=val or None)
    raise ValueError(f"unknown DSPy baseline {name!r}; baselines: {', '.join(DSPY_BASELINES)}")


# -- budget accounting of their prompts ----------------------------------------------------------------------
class _FirstPrompt(BaseCallback):
    """Records the first call of a demo module (the one the question is routed to): when it started, and the
    first prompt formatted inside it."""

    def __init__(self, demo_modules: Sequence):
        self.demo_modules = list(demo_modules)
        self.started: float | None = None
        self.formatting: float | None = None
        self.demos: list | None = None
        self.messages: list | None = None

    def on_module_start(self, call_id, instance, inputs):
        if self.started is None and any(instance is module for module in self.demo_modules):
            self.started = time.perf_counter()

    def on_adapter_format_start(self, call_id, instance, inputs):
        if self.started is not None and self.demos is None:
            self.formatting = time.perf_counter()
            self.demos = list(inputs.get("demos") or [])

    def on_adapter_format_end(self, call_id, outputs, exception=None):
        if self.demos is not None and self.messages is None and outputs is not None:
            self.messages = list(outputs)


class _PromptSeen(Exception):
    """Raised by the stand-in LM of a selection-only run: the prompt has been recorded, nothing more to do."""


class _StopAtFirstCall(BaseLM):
    def __init__(self):
        super().__init__(model="selection-only", model_type="chat", cache=False)

    def forward(self, prompt=None, messages=None, **kwargs):
        raise _PromptSeen

    async def aforward(self, prompt=None, messages=None, **kwargs):
        raise _PromptSeen


class BaselineProgram:
    """A program compiled by one of DSPy's optimizers, as the bench runs it: ``__call__`` answers and adds the
    ``selection`` of its demo predictor's first prompt; ``select_for`` gives that selection without an LM."""

    def __init__(self, program, *, pool: PoolView, counter, budget: int, reserve_output_tokens: int,
                 report: dict | None = None):
        self.program = program
        self.select = pool  # what the selection-quality metrics read
        self.counter = counter
        self.budget = int(budget)
        self.reserve = int(reserve_output_tokens)
        self.compile_report = dict(report or {})

    @property
    def demo_modules(self) -> list[dspy.Module]:
        return _demo_modules(self.program)

    def example_inputs(self, example) -> dict:
        return self.program.example_inputs(example)

    def prefetch_embeddings(self, examples, progress: bool = False) -> int:
        return self.program.prefetch_embeddings(examples, progress=progress)

    def prompt_group(self, example) -> str:
        """The program's (a routed pipeline: the route; ``bench.execution.runner.cache_friendly_order``), else ""."""
        group = getattr(self.program, "prompt_group", None)
        return group(example) if callable(group) else ""

    def _capture(self):
        capture = _FirstPrompt(self.demo_modules)
        return capture, dspy.context(callbacks=[*dspy.settings.get("callbacks", []), capture])

    def _selection(self, capture: _FirstPrompt) -> dict:
        if capture.messages is None:
            return {"ids": [], "within_budget": None}
        prompt = int(self.counter.count_messages(capture.messages))
        ids = [str(d.get("id")) if d.get("id") is not None else NO_ID for d in capture.demos]
        return {"ids": ids, "prompt_tokens": prompt, "budget": self.budget,
                "within_budget": prompt + self.reserve <= self.budget, "token_count": token_count_kind(self.counter),
                "selection_ms": (capture.formatting - capture.started) * 1e3, "predicted_attributes": {},
                "relaxed": []}

    def __call__(self, **inputs):
        capture, context = self._capture()
        with context:
            prediction = self.program(**inputs)
        selection = self._selection(capture)
        fields = {k: v for k, v in dict(prediction).items() if k not in ("selection", "exemplar_ids")}
        return dspy.Prediction(**fields, exemplar_ids=selection["ids"], selection=selection)

    def select_for(self, example) -> dict:
        """The demo predictor's first prompt for ``example``, without an LM (the program stops at its first call)."""
        capture, context = self._capture()
        with context, dspy.context(lm=_StopAtFirstCall()):
            with contextlib.suppress(_PromptSeen):
                self.program(**self.example_inputs(example))
        if capture.messages is None:
            raise RuntimeError("the program made no LM call for this example: nothing to measure")
        return self._selection(capture)
