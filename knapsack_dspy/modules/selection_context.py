"""What a selecting predictor is told about the query beyond its inputs, and where it reports what it chose.

A ``SelectingPredict`` sees only its signature's inputs. Two things travel beside them, both through DSPy's
own context (``dspy.context``), so they follow the call into ``dspy.Evaluate`` / ``dspy.Parallel`` worker
threads and into asyncio tasks, and never leak between concurrent calls:

- **hints** (``with selection_hints(id=..., doc_id=..., attributes=..., fields=...)``): the query's id and
  document (its exemplar and its document's exemplars are never chosen: no leakage), gold attribute values
  (oracle selectors such as ``seer_gold``) and the query's raw fields for LM attribute prediction. The
  calling module sets them (``DocumentQA`` does in its ``forward``); a plain program can be called inside
  the block.
- **the selection log** (``with selection_log() as log: program(...)``): one :class:`SelectionRecord` per
  selecting call made inside the block (the predictor's name, the demos sent, and the selection info: ids,
  prompt tokens, capacity, within budget, predicted attributes, selection ms). Logs nest: every open log
  receives the record.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dspy

__all__ = ["SelectionHints", "SelectionRecord", "current_hints", "record_selection", "selection_hints",
           "selection_log"]

_HINTS = "knapsack_selection_hints"
_LOGS = "knapsack_selection_logs"


@dataclass(frozen=True)
class SelectionHints:
    """What selection may know about the query besides the predictor's inputs."""

    id: str | None = None
    doc_id: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)  # gold attribute values (oracle selectors)
    fields: Mapping[str, Any] = field(default_factory=dict)  # the query's raw fields (LM attribute prediction)


@dataclass
class SelectionRecord:
    """One selecting call: which predictor, the demos it sent (fixed prefix + selected) and the selection info;
    ``inputs``: the input fields it sent in place of the ones given (a selectable field cut to the pieces chosen;
    ``{}``: the inputs as given)."""

    predictor: str
    demos: list
    info: dict
    inputs: dict = field(default_factory=dict)


class _Log(list):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()


@contextmanager
def selection_hints(id: str | None = None, doc_id: str | None = None, attributes: Mapping[str, Any] | None = None,
                    fields: Mapping[str, Any] | None = None) -> Iterator[SelectionHints]:
    """Tell the selecting predictors called inside the block about the query (see the module docstring)."""
    hints = SelectionHints(id=None if id is None else str(id), doc_id=None if doc_id is None else str(doc_id),
                           attributes=dict(attributes or {}), fields=dict(fields or {}))
    with dspy.context(**{_HINTS: hints}):
        yield hints


def current_hints() -> SelectionHints:
    """The innermost hints in effect (empty hints outside any ``selection_hints`` block)."""
    return dspy.settings.get(_HINTS) or SelectionHints()


@contextmanager
def selection_log() -> Iterator[list[SelectionRecord]]:
    """Collect a :class:`SelectionRecord` for every selecting call made inside the block (in call order)."""
    log = _Log()
    with dspy.context(**{_LOGS: (*(dspy.settings.get(_LOGS) or ()), log)}):
        yield log


def record_selection(record: SelectionRecord) -> None:
    """Append ``record`` to every open selection log (thread-safe)."""
    for log in dspy.settings.get(_LOGS) or ():
        with log.lock:
            log.append(record)
