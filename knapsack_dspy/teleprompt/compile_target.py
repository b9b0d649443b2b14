"""What compiling one predictor needs of the student, asked of it once (``KnapsackFewShot._target``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from knapsack_dspy.modules.select_exemplars import SelectExemplars
from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.selection.config import SelectionConfig

__all__ = ["CompileTarget"]


@dataclasses.dataclass(frozen=True)
class CompileTarget:
    """One predictor being compiled: its name, the selecting predictor, its settings before the search varies
    them, the functions labelling its pool exemplars, how a query's inputs to it are read (the student's
    ``inputs_for``, else the signature's input fields) and the student's own selection proxies
    (``ScoresSelections``), if any."""

    name: str
    selecting: SelectingPredict
    config: SelectionConfig
    attribute_functions: dict
    inputs: Callable[[Any], dict | None]
    proxies: Callable[[list, Any], Mapping[str, Any]] | None

    @property
    def select(self) -> SelectExemplars:
        return self.selecting.selection
