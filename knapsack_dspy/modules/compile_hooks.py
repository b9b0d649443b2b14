"""The hooks a student program may offer ``KnapsackFewShot.compile`` (DEVELOPERS.md, "Compile contract").

Every hook is optional: the teleprompter asks ``isinstance(program, DemoFor)`` (and so on) and falls back to its
default when the student has no such attribute (or sets it to ``None``). ``CompileHooks`` is the whole set the
ready-made pipelines implement (``pipeline._Pipeline``; ``tests/docqa/test_pipeline.py`` checks it). A sub-module that
learns from the trainset before the pools are built (a router) offers ``FitsOnTrainset``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from knapsack_dspy.selection.config import SelectionConfig


@runtime_checkable
class DemoFor(Protocol):
    def demo_for(self, predictor_name: str, example) -> Mapping | None:
        """A pool example as that predictor's demo; ``None``: not in its pool (default: the example restricted to
        the signature's fields)."""


@runtime_checkable
class InputsFor(Protocol):
    def inputs_for(self, predictor_name: str, example) -> Mapping | None:
        """A validation query's inputs to that predictor; ``None``: it has none (default: the example's fields of
        the signature's inputs)."""


@runtime_checkable
class SelectionConfigFor(Protocol):
    def selection_config(self, predictor_name: str) -> SelectionConfig | None:
        """That predictor's ``SelectionConfig`` when the teleprompter is given none (default: the defaults)."""


@runtime_checkable
class PoolAttributesFor(Protocol):
    def pool_attributes(self, predictor_name: str) -> Mapping[str, Callable] | None:
        """What that predictor's pool exemplars are labelled with, as functions of a trainset example:
        ``{"kind": f, "modality": g}`` (``"solution"``: the exemplar's worked solution, for selection-quality
        proxies, not an attribute). The teleprompter's own ``attributes=`` functions win over these (default: an
        attribute is the example's field of that name)."""


@runtime_checkable
class ScoresSelections(Protocol):
    def selection_proxies(self, rows: Sequence[tuple], select) -> Mapping[str, Any]:
        """Model-free proxies of one configuration's selections (``rows``: (validation example, selection info)
        pairs), ``"score"`` the one configurations are ranked by (default: ``teleprompt.selection_proxies``)."""


@runtime_checkable
class PrefetchesEmbeddings(Protocol):
    def prefetch_embeddings(self, examples: Sequence, progress: bool = False) -> int:
        """Embed in one batch what compiling ``examples`` will embed (then served from the cache)."""


@runtime_checkable
class HasEmbedder(Protocol):
    #: an object with ``encode(texts)``: the embedder selection uses when the teleprompter is given none
    embedder: Any


@runtime_checkable
class FitsOnTrainset(Protocol):
    def fit_on_trainset(self, trainset: Sequence, embedder) -> Any:
        """Learn from the trainset at compile time, before the pools are built (e.g. an answer-type router)."""


@runtime_checkable
class CompileHooks(DemoFor, InputsFor, SelectionConfigFor, PoolAttributesFor, ScoresSelections, PrefetchesEmbeddings,
                   HasEmbedder, Protocol):
    """Every hook of a student program: what ``DocumentQA`` and ``StatuteQA`` offer."""
