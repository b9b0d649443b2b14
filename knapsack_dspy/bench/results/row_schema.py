"""The results row: every field a line of ``predictions.jsonl`` may hold, declared once, with its version.

A row is one question of one run (``bench.execution.example_runner`` writes it; ``bench.results.store`` stores it, one
JSON object per line). :class:`ResultRow` declares each field -- its JSON key, the values it may hold, what it means,
whether every row has it -- and is how the package reads a row: ``row.em``, ``row.exemplar_ids``, ``row.spec``
(a field a row does not hold reads as ``None``; ``spec`` as ``{}``, ``exemplar_ids`` as ``[]``). A ``ResultRow``
is a read-only mapping of the same JSON keys (``row.to_json()`` is the line's object), so results files and run
keys written before this module existed stay valid.

- **Writing** (:meth:`ResultRow.build`): a key the schema does not declare, a missing required field or a value
  of the wrong kind is a :class:`RowSchemaError` -- a bug in the code that built the row, not a fault of the
  example (the tests build every kind of row). Every new row records ``schema_version`` (:data:`SCHEMA_VERSION`).
- **Reading** (:meth:`ResultRow.from_json`): a row without ``schema_version`` is version 1; older rows are
  migrated on read to the current version (:data:`MIGRATIONS`), so readers see one shape; a row of a newer
  version than this code is a one-line :class:`RowSchemaError`. Keys a row holds that this version does not
  declare are kept (a rewrite does not lose them) but not read.

Adding a field: declare it below (kind, meaning), write it in the writer. Renaming or re-shaping one: bump
``saved_format.RESULT_ROW_SCHEMA_VERSION`` (with its history line) and add the migration from the previous version
here.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from knapsack_dspy.saved_format import RESULT_ROW_SCHEMA_VERSION

__all__ = [
    "ANSWER",
    "CONFIG",
    "ERROR_KINDS",
    "INTERNAL",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TRANSIENT",
    "UNRECORDED",
    "ResultRow",
    "RowField",
    "RowSchemaError",
    "as_row",
    "rows_of",
]

#: The version of the rows this code writes (its history: ``saved_format.RESULT_ROW_SCHEMA_VERSION``).
SCHEMA_VERSION = RESULT_ROW_SCHEMA_VERSION

#: ``error_kind`` values (``bench.results.row_outcomes`` says what each means for a run).
TRANSIENT, CONFIG, INTERNAL, ANSWER = "transient", "config", "internal", "answer"
ERROR_KINDS = (TRANSIENT, CONFIG, INTERNAL, ANSWER)
UNRECORDED = "unrecorded"  # a version-1 row whose LM call failed, of unknown kind


class RowSchemaError(ValueError):
    """A row that does not match the schema (one line naming the field)."""


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


_KINDS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": _is_int,
    "float": _is_number,  # an integral score (0) is a float's value too
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, (list, tuple)),
    "dict": lambda v: isinstance(v, Mapping),
    "any": lambda v: True,  # what the model produced (or the gold answer): any JSON value
}


class RowField:
    """One declared field of a results row: ``kind`` (``"float | None"``: the values it may hold), ``meaning``,
    ``required`` (every row holds it). Read on a row (``row.em``) it is the row's value (``absent()`` when the row
    does not hold it); on the class (``ResultRow.em``) it is the declaration: ``.name`` is its JSON key."""

    def __init__(self, kind: str, meaning: str, *, required: bool = False, key: str | None = None,
                 absent: Callable[[], Any] | None = None):
        names = [part.strip() for part in kind.split("|")]
        unknown = [n for n in names if n not in _KINDS and n != "None"]
        if unknown:
            raise TypeError(f"RowField kind {kind!r}: unknown {unknown}")
        self.kind, self.meaning, self.required = kind, meaning, required
        self.nullable = "None" in names
        self._checks = [_KINDS[n] for n in names if n != "None"]
        self._key, self._absent = key, absent
        self.name = key or ""

    def __set_name__(self, owner, attribute: str) -> None:
        self.attribute = attribute
        self.name = self._key or attribute

    def __get__(self, row, owner=None):
        if row is None:
            return self
        return self.of(row)

    def of(self, row: ResultRow) -> Any:
        """The field's value in ``row``."""
        value = row._data.get(self.name)
        return self._absent() if value is None and self._absent is not None else value

    def accepts(self, value) -> bool:
        return (value is None and self.nullable) or any(check(value) for check in self._checks)

    def __repr__(self) -> str:
        return f"RowField({self.name!r}: {self.kind})"


class ResultRow(Mapping):
    """One results row (see the module docstring): read-only, its fields as attributes."""

    __slots__ = ("_data",)

    # -- identity ---------------------------------------------------------------------------------------
    schema_version = RowField("int", "the row schema version that wrote it (rows without one are version 1)",
                              required=True)
    run = RowField("str", "the run's key (``RunSpec.key``): what resuming matches on", required=True)
    example_id = RowField("str", "the question's id in its eval split", required=True)
    doc_id = RowField("str | None", "the question's document (None: the data set has none); the unit of the "
                                    "by-document bootstrap")
    spec = RowField("dict", "the run's settings (``dataclasses.asdict(RunSpec)``)", absent=dict)
    provenance = RowField("dict | None", "what produced the row (``bench.results.provenance``): code commit and dirty "
                                         "flag, package versions, model weights' sha256, adapter, seed")
    latency_s = RowField("float | None", "seconds the example took, everything included (None: not timed)")

    # -- selection ----------------------------------------------------------------------------------------
    exemplar_ids = RowField("list", "the selected exemplars' pool ids, in prompt order", absent=list)
    prompt_tokens = RowField("int | None", "the prompt's tokens as selection measured them (question + demos)")
    within_budget = RowField("bool | None", "the prompt fits the token budget (None: selection failed)")
    exemplar_tokens = RowField("int", "the selected exemplars' own tokens, shared fields paid once (the selection's "
                                      "total cost: what an exemplar budget bounds); part of prompt_tokens")
    token_count = RowField("str", "how the tokens were counted: 'exact' (the model's own tokenizer) or 'estimate' "
                                  "(no known tokenizer, cl100k_base: prompt_tokens and within_budget approximate)")
    selection_ms = RowField("float", "milliseconds spent selecting")
    predicted_attributes = RowField("dict", "the question's predicted attribute values (attribute -> value)")
    relaxed = RowField("list", "the constraints the knapsack relaxed to find a feasible set")
    selection_status = RowField("str", "how a selection a knapsack's limit ended was found: 'incumbent' (the "
                                       "solver's best then) or 'greedy' (the constrained greedy's, better); "
                                       "'time_limit' in rows before the work limit (a wall-clock limit: such a "
                                       "selection depends on the machine's load); absent: proven optimal, or "
                                       "no knapsack")
    selection_limit = RowField("str", "the limit that ended the knapsack's search: 'work' (its node count: the "
                                      "same on any machine) or 'time' (the wall-clock safety net)")
    new_prompt_tokens = RowField("int", "latency budget: the prompt's tokens outside the cached shared prefix")
    predicted_latency_s = RowField("float", "latency budget: the predicted seconds of the call")
    latency_budget = RowField("float", "latency budget: the seconds the prompt was allowed")
    gold_case_hit = RowField("bool", "model-free: an exemplar's program matches the gold program (>= 0.9)")
    program_score = RowField("float | None", "model-free: the best program similarity of an exemplar to the gold one")
    attribute_match = RowField("dict", "model-free: attribute -> the share of the exemplars whose value of it is the "
                                       "question's gold value (``docqa.metrics.selection_proxies``; the attributes the "
                                       "question has a value of)")

    # -- the prompt's parts: its instructions and its evidence (selectable evidence, issue 49) ------------------
    instructions_sha256 = RowField("str", "the sha256 of the instructions the prompt opens with (the system message "
                                          "as sent: the first LM call's, else the selecting predictor's): arms "
                                          "meant to send the same instructions can be checked to")
    instruction_tokens = RowField("int", "the instructions' tokens (the system message): part of prompt_tokens")
    tokens_after_instructions = RowField("int", "prompt_tokens - instruction_tokens: the demos, the question and its "
                                                "evidence")
    evidence_mode = RowField("str", "selectable evidence: how the demos and the pieces were chosen ('joint', "
                                    "'sequential', 'relevance', 'sequential_fallback')")
    pieces_kept = RowField("int", "selectable evidence: the pieces the prompt showed")
    pieces_offered = RowField("int", "selectable evidence: the pieces the query offered")
    evidence_tokens = RowField("int", "selectable evidence: the shown pieces' tokens with their fixed parts (as the "
                                      "knapsack counted them); part of prompt_tokens")
    evidence_pieces = RowField("dict", "selectable evidence: per selectable field, the indices of the pieces shown "
                                       "(ascending)")

    # -- the answer -------------------------------------------------------------------------------------
    output = RowField("any", "the program or reasoning the LM wrote (None: no reply)")
    answer = RowField("any", "the executed / extracted answer (absent: the LM was never asked)")
    scale = RowField("any", "the answer's scale (TAT-QA: thousand, million, billion, percent or '')")
    error = RowField("str | None", "what went wrong (None: nothing)")
    error_kind = RowField("str | None", f"the error's kind: {', '.join(ERROR_KINDS)} (``bench.results.row_outcomes``); "
                                        f"{UNRECORDED!r} for a version-1 row whose LM call failed")
    traceback = RowField("str", "the last frames of a failed LM call or pipeline (files named from their "
                                "site-packages or knapsack_dspy folder on: paths.portable_traceback)")
    attempts = RowField("int | None", "program attempts (a repair turn makes 2; samples with self-consistency)")
    route = RowField("any", "routed pipelines: the route the question took (extract / compute)")
    routed_answer_type = RowField("any", "routed pipelines: the answer type the router predicted")
    p_extract = RowField("any", "routed pipelines: the router's probability of the extract route")
    raw_answer = RowField("any", "an extraction's raw reply, before its scale was decided")
    model_scale = RowField("any", "the scale the model wrote, when a rule chose the answer's")
    scale_reason = RowField("any", "the rule that decided the answer's scale")
    cell_fixes = RowField("any", "a program's numbers replaced by the table cells its comments name")
    sample_answers = RowField("any", "self-consistency: each sample's executed answer (None: it failed)")
    votes = RowField("any", "self-consistency: the votes of the winning answer")

    # -- LM traffic -------------------------------------------------------------------------------------
    lm_calls = RowField("int", "real LM calls (answers from DSPy's cache not counted)")
    cache_hits = RowField("int", "LM calls answered from DSPy's cache")
    replayed = RowField("int", "LM calls answered from an earlier run's recorded replies (``kdspy bench --reuse``)")
    cost_usd = RowField("float", "the LM calls' cost in US dollars (0 when the provider does not say)")
    cached_prompt_tokens = RowField("int", "prompt tokens the provider's prompt cache served")
    cache_write_tokens = RowField("int", "Anthropic: prompt tokens written to its cache")
    prefill_s = RowField("float", "embedded models: seconds of prompt processing (llama.cpp's timings)")
    decode_s = RowField("float", "embedded models: seconds of generation")
    lm_seconds = RowField("float", "seconds inside LM calls (``bench.execution.lm_timing``)")
    prompt_tokens_used = RowField("int", "prompt tokens the LM reported")
    completion_tokens_used = RowField("int", "completion tokens the LM reported")
    reported_prompt_tokens = RowField("list", "each LM call's prompt tokens as its provider reported them "
                                              "(``usage.prompt_tokens``), in the order of ``prompt_sha256``; None "
                                              "for a call no provider answered (a DSPy cache hit, a replay, a "
                                              "failure); absent when no call reached a provider")
    counted_prompt_tokens = RowField("list", "each LM call's prompt tokens as the run's own token counter counts "
                                             "its messages (what the budget is checked with; ``token_count``: "
                                             "exact or estimate), in the same order (``bench.execution.call_tokens``)")
    prompt_sha256 = RowField("list", "the sha256 of each LM call's messages, in call order "
                                       "(``bench.results.prompt_record``)")
    prompt_format = RowField("int", "the prompt format version that rendered them (``PROMPT_FORMAT_VERSION``)")
    reply_keys = RowField("list", "each LM call's reply key, in the order of ``prompt_sha256``: the messages' "
                                  "fingerprint with the model, its weights' sha256, the runtime's version and the "
                                  "decoding settings (``llm.prompt_fingerprint.reply_key``): what a recorded "
                                  "reply must match to answer a prompt of a later run (``--reuse``)")
    completions = RowField("list", "the text each LM call returned, in the order of ``prompt_sha256`` (a list of "
                                   "texts for a call that returned several; None for a call that failed): "
                                   "what a replay serves by prompt fingerprint")

    # -- scores (``bench.scoring.example_scores``) --------------------------------------------------------------------
    gold = RowField("any", "the gold answer")
    gold_scale = RowField("str", "the gold answer's scale ('' when none)")
    em = RowField("float | None", "exact match (0 or 1; TAT-QA's official rule with the scale)")
    f1 = RowField("float | None", "TAT-QA: the numeracy-focused F1")
    correct = RowField("bool", "right by the data set's official rule")
    program_correct = RowField("bool | None", "FinQA-DSL: program accuracy (None: not defined for the program)")
    program_check = RowField("str", "FinQA-DSL: why the program comparison was skipped")
    kdspy_lenient = RowField("bool", "FinQA: our own lenient match (not SEER's rule)")
    within_10pct = RowField("bool | None", "SARA numerical cases: within 10 % of the gold amount")
    authors_rule = RowField("bool | None", "SARA numerical cases: within max(10 %, $5,000) (the authors' rule)")
    case_type = RowField("str", "SARA: entailment or numerical")
    score_error = RowField("str", "why the answer could not be scored (it counts wrong)")

    # -- the store ------------------------------------------------------------------------------------
    escaped = RowField("list", "the fields whose strings UTF-8 could not encode, written escaped")

    # ------------------------------------------------------------------------------------------------
    def __init__(self, data: dict):
        """Use :meth:`build` (a new row) or :meth:`from_json` (a stored one)."""
        self._data = data

    @classmethod
    def fields(cls) -> Mapping[str, RowField]:
        """Every declared field by its JSON key (read-only)."""
        return MappingProxyType(_FIELDS)

    @classmethod
    def build(cls, fields: Mapping[str, Any]) -> ResultRow:
        """A new row of ``fields`` (JSON keys), checked against the schema; ``schema_version`` is added.
        Raises :class:`RowSchemaError` for an undeclared key, a missing required field, a value of another kind."""
        data = {"schema_version": SCHEMA_VERSION, **fields}
        if data["schema_version"] != SCHEMA_VERSION:
            raise RowSchemaError(f"a new row is schema version {SCHEMA_VERSION}, not {data['schema_version']!r}")
        _check(data, data)
        missing = [f.name for f in _FIELDS.values() if f.required and f.name not in data]
        if missing:
            raise RowSchemaError(f"a results row needs {', '.join(map(repr, missing))}")
        if data.get("error") and data.get("error_kind") is None:
            raise RowSchemaError(f"a row with an error needs its error_kind (example {data['example_id']!r})")
        return cls(data)

    @classmethod
    def from_json(cls, obj: Any) -> ResultRow:
        """The row a results line holds (its parsed JSON object), migrated to :data:`SCHEMA_VERSION`."""
        if not isinstance(obj, dict) or "run" not in obj or "example_id" not in obj:
            raise RowSchemaError("not a results row: an object with 'run' and 'example_id'")
        version = obj.get("schema_version", 1)
        if not _is_int(version) or version < 1:
            raise RowSchemaError(f"schema_version must be a whole number >= 1, got {version!r}")
        if version > SCHEMA_VERSION:
            raise RowSchemaError(f"a version-{version} results row, written by a newer knapsack-dspy: this one reads "
                                 f"versions 1 to {SCHEMA_VERSION}; upgrade it to read these results")
        data = obj
        while version < SCHEMA_VERSION:
            data = MIGRATIONS[version](dict(data))
            version += 1
        return cls(data)

    def to_json(self) -> dict:
        """The row as the JSON object a results line holds (a copy)."""
        return dict(self._data)

    def has(self, field: RowField) -> bool:
        """Whether the row holds ``field`` at all (even as None): e.g. ``answer`` tells a row whose LM was asked."""
        return field.name in self._data

    def replace(self, changes: Mapping[str, Any] = (), **more) -> ResultRow:
        """A new row with ``changes`` (JSON keys) set, checked like :meth:`build`'s fields."""
        changes = {**dict(changes), **more}
        _check(changes, changes)
        return ResultRow({**self._data, **changes})

    def without(self, fields: Iterable[RowField]) -> ResultRow:
        """A new row without ``fields``."""
        names = {f.name for f in fields}
        return ResultRow({k: v for k, v in self._data.items() if k not in names})

    # -- the read-only mapping of JSON keys ------------------------------------------------------------
    def __getitem__(self, key: str):
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ResultRow({self._data!r})"

    def __reduce__(self):  # pickled to other processes (Ray workers hand their rows to the driver)
        return ResultRow, (self._data,)


_FIELDS: dict[str, RowField] = {f.name: f for f in vars(ResultRow).values() if isinstance(f, RowField)}


def _check(fields: Mapping[str, Any], row: Mapping) -> None:
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise RowSchemaError(f"undeclared results-row field {', '.join(map(repr, unknown))} (declare it in "
                             "knapsack_dspy/bench/results/row_schema.py)")
    for name, value in fields.items():
        field = _FIELDS[name]
        if not field.accepts(value):
            raise RowSchemaError(f"results-row field {name!r} holds {field.kind}, got {type(value).__name__} "
                                 f"{value!r:.80} (example {row.get('example_id')!r})")


def _from_version_1(row: dict) -> dict:
    """Version 1 -> 2: the old name ``lenient`` is ``kdspy_lenient``; a row with an error but no ``error_kind``
    (written before kinds existed) gets the one its shape says -- a failed LM call left no ``output`` and kept a
    ``traceback`` (:data:`UNRECORDED`: of unknown kind); any other error was the answer's."""
    if "lenient" in row and "kdspy_lenient" not in row:
        row["kdspy_lenient"] = row.pop("lenient")
    if row.get("error_kind") is None and row.get("error"):
        row["error_kind"] = UNRECORDED if row.get("output") is None and "traceback" in row else ANSWER
    return {"schema_version": 2, **{k: v for k, v in row.items() if k != "schema_version"}}


#: The prefix of version 2's fields of one attribute's match each (``attribute_match.modality``).
_ATTRIBUTE_MATCH_PREFIX = "attribute_match."


def _from_version_2(row: dict) -> dict:
    """Version 2 -> 3: the fields ``attribute_match.<attribute>`` become one ``attribute_match`` field (attribute ->
    share, in the order they were written), where the first of them was."""
    shares = {key[len(_ATTRIBUTE_MATCH_PREFIX):]: value for key, value in row.items()
              if key.startswith(_ATTRIBUTE_MATCH_PREFIX)}
    out: dict = {}
    for key, value in row.items():
        if key == "schema_version":
            continue
        if key.startswith(_ATTRIBUTE_MATCH_PREFIX):
            if "attribute_match" not in out:
                out["attribute_match"] = shares
            continue
        out[key] = value
    return {"schema_version": 3, **out}


#: ``version -> function`` turning a row of that version into one of the next.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _from_version_1, 2: _from_version_2}


def as_row(row: Mapping) -> ResultRow:
    """``row`` as a :class:`ResultRow` (a stored row's JSON object is read with :meth:`ResultRow.from_json`)."""
    return row if isinstance(row, ResultRow) else ResultRow.from_json(dict(row))


def rows_of(rows: Iterable[Mapping]) -> list[ResultRow]:
    """Every row of ``rows`` as a :class:`ResultRow` (what the report's readers take)."""
    return [as_row(row) for row in rows]
