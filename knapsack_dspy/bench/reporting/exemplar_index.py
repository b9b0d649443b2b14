"""What the exemplars a results row names looked like: their questions and the demo fields the prompt showed.

A row keeps only its exemplars' ids. The compiled program of its run (``<dir>/programs/``, written by
``kdspy bench``) holds each selecting predictor's pool as the prompt shows it (the question, and the program /
answer / reasoning the demo teaches); a routed pipeline has two (``solve.write`` and ``extract.answer``), and a
row's exemplars belong to the predictor of its route. When the program is not there (results directories commit
only their rows), the exemplar is read from the run's pool split instead: its question, gold answer and
derivation, not the demo as rendered (``source`` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.results.question_facts import stored_split
from knapsack_dspy.bench.results.row_schema import ResultRow, rows_of
from knapsack_dspy.docqa.pipelines.pipeline import load_program
from knapsack_dspy.messages import one_line
from knapsack_dspy.modules.select_exemplars import NotCompiledError
from knapsack_dspy.modules.selecting_predict import SelectingPredict

__all__ = ["ExemplarIndex", "index_exemplars"]

MAX_FIELD_CHARS = 3000  # of one demo field shown on the page (a table is not shown: the query's document is)
_NOT_SHOWN = ("table", "paragraphs", "text", "statute", "facts")  # context fields: long, and not what differs
_POOL_FIELDS = ("answer", "scale", "derivation", "program")


@dataclass
class ExemplarIndex:
    """``exemplars``: key -> {id, question, shows: {field: text}, source}; ``of_row``: (run, example id) -> the
    keys of the row's exemplars in prompt order; ``notes``: what could not be read."""

    exemplars: dict[str, dict] = field(default_factory=dict)
    of_row: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, info: dict) -> str:
        """Store ``info`` under ``key`` (or a numbered variant when another program rendered it differently)."""
        n, candidate = 1, key
        while candidate in self.exemplars and self.exemplars[candidate] != info:
            n += 1
            candidate = f"{key}#{n}"
        self.exemplars[candidate] = info
        return candidate


def _text(value) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS] + " …"


def _program_demos(path: Path) -> tuple[dict[str, tuple[dict, list[str]]], Callable[[ResultRow], str]]:
    """Per selecting predictor of the saved program: (pool id -> demo, the fields its prompt shows); and which of
    them a row's exemplars come from: the one the program says the row's route drew them from
    (``demo_predictor_of_route``: a routed pipeline's extractor for its extract route), else the main one."""
    program = load_program(path)
    out = {}
    for name, predictor in program.named_predictors():
        if isinstance(predictor, SelectingPredict):
            selection = predictor.selection
            shown = ["question", *(f for f in predictor.signature.output_fields if f not in _NOT_SHOWN)]
            out[name] = (dict(zip(selection.pool_ids, selection.demos, strict=True)), shown)
    main = getattr(program, "demo_predictor_name", None)
    if main in out:  # the default route first
        out = {main: out[main], **{k: v for k, v in out.items() if k != main}}
    of_route = getattr(program, "demo_predictor_of_route", None)

    def predictor_for(row: ResultRow) -> str:
        name = None if of_route is None else of_route(row.route)
        return name if name in out else next(iter(out))

    return out, predictor_for


def index_exemplars(rows: Iterable[Mapping], out_dir: Path,
                    load_pool: Callable[[SimpleNamespace], Iterable] | None = None) -> ExemplarIndex:
    """The exemplars ``rows`` name, from each run's compiled program in ``out_dir/programs`` or else from its
    pool (``load_pool(spec)``, e.g. ``lambda s: run_program.load_split(s, "pool", data_dir)``; None: ids only)."""
    index = ExemplarIndex()
    by_run: dict[str, list[ResultRow]] = {}
    for row in rows_of(rows):
        if row.exemplar_ids:
            by_run.setdefault(row.run, []).append(row)
    pools: dict[tuple, dict] = {}
    for run, run_rows in by_run.items():
        spec = run_rows[0].spec
        path = run_program.saved_program_path(out_dir, run, spec)
        programs, predictor_for = {}, None
        if path.is_file():
            try:
                programs, predictor_for = _program_demos(path)
            except (ValueError, OSError, NotCompiledError) as exc:
                index.notes.append(f"{path.name}: {one_line(exc, 200)}; its exemplars are read from the pool")
        pool = None
        if not programs:
            pool = _pool_of(spec, load_pool, pools, index)
        for row in run_rows:
            keys = []
            name = predictor_for(row) if programs else None
            for exemplar_id in row.exemplar_ids:
                exemplar_id = str(exemplar_id)
                if name is not None and exemplar_id in programs[name][0]:
                    demo, shown = programs[name][0][exemplar_id], programs[name][1]
                    info = {"id": exemplar_id, "question": _text(demo.get("question")),
                            "shows": {f: _text(demo.get(f)) for f in shown[1:] if demo.get(f) not in (None, "")},
                            "source": f"compiled program ({name}): the demo as the prompt showed it"}
                    keys.append(index.add(f"{name}:{exemplar_id}", info))
                elif pool is not None and exemplar_id in pool:
                    example = pool[exemplar_id]
                    info = {"id": exemplar_id, "question": _text(example.get("question")),
                            "shows": {f: _text(example.get(f)) for f in _POOL_FIELDS
                                      if example.get(f) not in (None, "", [])},
                            "source": "the pool (no compiled program in programs/: the gold answer and derivation, "
                                      "not the demo as rendered)"}
                    keys.append(index.add(f"pool:{exemplar_id}", info))
                else:
                    keys.append(index.add(f"unknown:{exemplar_id}", {"id": exemplar_id, "question": None,
                                                                      "shows": {}, "source": "not found"}))
            index.of_row[row.run, str(row.example_id)] = keys
    return index


def _pool_of(spec: Mapping, load_pool, pools: dict, index: ExemplarIndex) -> dict | None:
    """The run's pool examples by id (read once per split), or None when they cannot be read."""
    if load_pool is None:
        return None
    split = stored_split(spec)  # what load_split reads; rows of older code lack some fields (pool_dataset)
    key = (split.pool_dataset or split.dataset, split.pool_split, split.pool_path)
    if key not in pools:
        try:
            pools[key] = {str(ex.get("id")): ex for ex in load_pool(split)}
        except (ValueError, OSError) as exc:  # DataError is a ValueError
            index.notes.append(f"the {key[0]} pool could not be read ({one_line(exc, 200)}): exemplars are "
                               "shown by id only")
            pools[key] = None
    return pools[key]
