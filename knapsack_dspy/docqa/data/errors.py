"""Errors and load reports of the data layer.

A :class:`DataError` names where bad input is: the file (or hub data set), the record index, the record's
id when known and the field. With ``skip_invalid=True`` the loaders record the same information in a
:class:`LoadReport` instead of raising, one :class:`SkippedRecord` per record left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line

__all__ = ["DataError", "LoadReport", "SkippedRecord"]


class DataError(KnapsackDspyError, ValueError):
    """Bad or missing input data. ``str(error)`` is one line: ``<source>: record <i> (id '<id>'): field '<f>': ...``.

    Attributes (``None`` when not applicable): ``source`` (file path or ``hub:<id>``), ``index`` (0-based
    record index in the file; for TAT-QA the context index), ``record_id``, ``field`` (dotted path such as
    ``questions[2].answer_type`` or ``qa.program``) and ``problem`` (what is wrong).
    """

    def __init__(self, problem: str, *, source: str | None = None, index: int | None = None,
                 record_id: str | None = None, field: str | None = None):
        self.problem = problem
        self.source = source
        self.index = index
        self.record_id = record_id
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.source:
            parts.append(str(self.source))
        if self.index is not None:
            where = f"record {self.index}"
            if self.record_id:
                where += f" (id {self.record_id!r})"
            parts.append(where)
        elif self.record_id:
            parts.append(f"id {self.record_id!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        parts.append(self.problem)
        return one_line(": ".join(parts))

    def located(self, *, source: str | None = None, index: int | None = None,
                record_id: str | None = None, field_prefix: str | None = None) -> DataError:
        """A copy with missing location parts filled in (parsers raise without knowing the file)."""
        field_name = self.field
        if field_prefix:
            field_name = f"{field_prefix}.{field_name}" if field_name else field_prefix
        return DataError(self.problem, source=self.source or source,
                         index=self.index if self.index is not None else index,
                         record_id=self.record_id or record_id, field=field_name)


@dataclass(frozen=True)
class SkippedRecord:
    """One record left out by ``skip_invalid=True``: where it was and why (the error's one-line message)."""

    index: int | None
    record_id: str | None
    field: str | None
    problem: str
    message: str
    questions_lost: int = 1  # TAT-QA: a bad context loses all its questions

    @classmethod
    def from_error(cls, error: DataError, questions_lost: int = 1) -> SkippedRecord:
        return cls(error.index, error.record_id, error.field, error.problem, str(error), questions_lost)


@dataclass
class LoadReport:
    """What one ``load_examples`` call read: counts and the records it skipped."""

    dataset: str
    source: str
    split: str | None = None
    records_read: int = 0  # records (TAT-QA: contexts) looked at
    examples_loaded: int = 0
    skipped: list[SkippedRecord] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def n_skipped(self) -> int:
        """Questions lost to skipped records."""
        return sum(s.questions_lost for s in self.skipped)

    def summary(self) -> str:
        text = (f"{self.dataset} ({self.source}): loaded {self.examples_loaded} examples from "
                f"{self.records_read} records")
        if self.skipped:
            text += f"; skipped {len(self.skipped)} invalid record(s)"
            if self.n_skipped != len(self.skipped):
                text += f" ({self.n_skipped} questions lost)"
            text += f"; first: {self.skipped[0].message}"
        return text
