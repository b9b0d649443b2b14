"""``load_examples``: one entry point for every data set, from the data directory, a file or the hub.

A data set is declared by its task (``docqa/tasks/<name>.py``: its ``DatasetSpec``) and registered with it; the
loader finds the tasks on first use (``docqa/task_discovery.py``)."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from knapsack_dspy import paths
from knapsack_dspy.docqa.data.document_parts import in_part
from knapsack_dspy.docqa.data.errors import DataError, LoadReport, SkippedRecord
from knapsack_dspy.docqa.data.example_fields import make_example
from knapsack_dspy.docqa.data.readers import read_hub_rows, read_records
from knapsack_dspy.docqa.task_discovery import discover_tasks
from knapsack_dspy.errors import KnapsackDspyWarning

__all__ = ["DATASETS", "DataWarning", "DatasetSpec", "LoadedExamples", "find_split_file", "ignore_split",
           "load_examples", "register_dataset", "unregister_dataset"]


class DataWarning(KnapsackDspyWarning, UserWarning):
    """Emitted when ``skip_invalid=True`` skipped records (the summary names the first one)."""


class LoadedExamples(list):
    """A ``list[dspy.Example]`` that also carries the :class:`LoadReport` of the load (``.report``).

    Slicing or copying gives a plain list; keep a reference to the original to keep the report.
    """

    def __init__(self, examples=(), report: LoadReport | None = None):
        super().__init__(examples)
        self.report = report


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    folder: str  # sub-folder of the data directory
    file_patterns: tuple[str, ...]  # candidate file names, "{split}" filled in, tried in order
    parse: Callable  # (record, split) -> list[fields dict | DataError]; raises DataError for a bad record
    known_splits: tuple[str, ...] = ()
    default_split: str | None = None
    record_size: Callable = lambda record: 1  # examples lost when the whole record is skipped
    documents_note: str = ""  # extra hint when no file is found
    not_splits: tuple[str, ...] = ()  # files matching a pattern that hold no split (listing only)
    # splits made of parts of other splits' files, cut by document (knapsack_dspy.docqa.data.document_parts):
    # name -> the pieces, in order, each (split of the file, "pool" | "eval" | "" for the whole file)
    parts: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


def ignore_split(parse: Callable) -> Callable:
    """A ``DatasetSpec.parse`` of ``parse(record)``: for a data set whose records read the same in every split."""
    return lambda record, split: parse(record)


class _Datasets(Mapping):
    """name -> ``DatasetSpec``, read-only (``register_dataset`` adds to it): a name not registered yet makes the
    tasks be found first (``docqa/task_discovery.py``), as does listing the names."""

    def __getitem__(self, name: str) -> DatasetSpec:
        if name not in _SPECS:
            discover_tasks()
        return _SPECS[name]

    def __contains__(self, name) -> bool:
        if name not in _SPECS:
            discover_tasks()
        return name in _SPECS

    def __iter__(self) -> Iterator[str]:
        discover_tasks()
        return iter(list(_SPECS))

    def __len__(self) -> int:
        discover_tasks()
        return len(_SPECS)


_SPECS: dict[str, DatasetSpec] = {}
#: every data set ``load_examples`` reads: its task registered it (``register_dataset``)
DATASETS = _Datasets()


def register_dataset(spec: DatasetSpec, replace: bool = False) -> DatasetSpec:
    """Make ``load_examples(spec.name, ...)`` read a data set's files as ``spec`` says (a task registers its own:
    ``docqa.tasks.register_task``); a name already taken by another spec is an error unless ``replace=True``."""
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"register_dataset: {spec!r} is not a DatasetSpec")
    if spec.name in _SPECS and _SPECS[spec.name] is not spec and not replace:
        raise ValueError(f"register_dataset: the name {spec.name!r} is taken (pass replace=True to replace it)")
    _SPECS[spec.name] = spec
    return spec


def unregister_dataset(name: str) -> DatasetSpec | None:
    """Forget the data set ``name`` (``docqa.tasks.unregister_task`` forgets its task too); its spec, or None."""
    return _SPECS.pop(name, None)


def _available_splits(folder: Path, spec: DatasetSpec) -> list[str]:
    found = set()
    if folder.is_dir():
        for pattern in spec.file_patterns:
            prefix, _, suffix = pattern.partition("{split}")
            for file in folder.iterdir():
                name = file.name
                if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
                    found.add(name[len(prefix):len(name) - len(suffix)])
    found -= set(spec.not_splits)
    found |= {name for name, pieces in spec.parts if all(whole in found for whole, _ in pieces)}
    return sorted(found)


def find_split_file(dataset: str, split: str, data_dir: str | os.PathLike | None = None) -> Path:
    """The file holding ``split`` of ``dataset`` in the data directory (for a part, its whole file; for a split
    of several files, the first); ``DataError`` lists what exists."""
    return _split_sources(dataset, split, data_dir)[0][0]


def _split_sources(dataset: str, split: str, data_dir) -> list[tuple[Path, str]]:
    """(file, part) of each piece of ``split``: its own file whole (part ``""``), or the pieces of a split cut by
    document (``DatasetSpec.parts``)."""
    pieces = dict(_spec(dataset).parts).get(split, ((split, ""),))
    return [(_whole_split_file(dataset, whole, data_dir), part) for whole, part in pieces]


def _whole_split_file(dataset: str, split: str, data_dir) -> Path:
    spec = _spec(dataset)
    try:
        folder = paths.data_dir(data_dir) / spec.folder
    except paths.ConfigError as exc:
        raise DataError(str(exc)) from None
    for pattern in spec.file_patterns:
        candidate = folder / pattern.format(split=split)
        if candidate.is_file():
            return candidate
    available = _available_splits(folder, spec)
    message = f"no {dataset} split {split!r} in {folder}"
    message += f" (available: {', '.join(available)})" if available else " (no split files there)"
    if spec.documents_note:
        message += f"; {spec.documents_note}"
    raise DataError(message)


def _spec(dataset: str) -> DatasetSpec:
    if not isinstance(dataset, str) or dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; expected one of {', '.join(sorted(DATASETS))}")
    return DATASETS[dataset]


#: Files of more records than this are checked completely before any example is built (when bad records
#: raise): a bad last record then costs the memory of one record's fields, not of all the examples before
#: (each example holds its own copy of its table). The real splits have at most 6,251 records.
CHECK_FIRST_RECORDS = 10_000


def _raise_first_error(records: list, parse: Callable, origin: str, limit: int | None) -> None:
    """The first bad record's DataError (as the loading loop would raise it), keeping nothing parsed."""
    seen: dict[str, int] = {}
    loaded = 0
    for index, record in enumerate(records):
        if limit is not None and loaded >= limit:
            return
        try:
            results = [record] if isinstance(record, DataError) else parse(record)
        except DataError as error:
            results = [error]
        for result in results:
            if limit is not None and loaded >= limit:
                return
            if isinstance(result, DataError):
                raise result.located(source=origin, index=index)
            if result["id"] in seen:
                raise DataError(f"duplicate id (first seen in record {seen[result['id']]})",
                                record_id=result["id"], field="id").located(source=origin, index=index)
            seen[result["id"]] = index
            loaded += 1


def load_examples(dataset: str, split: str | None = None, data_dir: str | os.PathLike | None = None,
                  skip_invalid: bool = False, limit: int | None = None, *,
                  path: str | os.PathLike | None = None, source: str | None = None) -> LoadedExamples:
    """Load ``dataset`` as ``dspy.Example`` objects with the uniform fields (see ``docs/data.md``).

    Where the records come from, first match wins:
    - ``source="hub:<dataset id>"``: ``datasets.load_dataset(id, split=split)`` (needs ``split``);
    - ``path``: that file (``.json``, ``.json.gz``, ``.jsonl``, ``.csv.gz``), in the dataset's schema;
    - otherwise the split's file in the data directory (``data_dir`` or ``$KDSPY_DATA_DIR``).

    ``skip_invalid``: bad records are skipped instead of raising :class:`DataError`; a
    :class:`DataWarning` summarises them and ``result.report.skipped`` lists them. ``limit``: stop after
    that many examples (file order). Example ids must be unique within the load.
    """
    spec = _spec(dataset)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise DataError(f"limit must be a non-negative int or None, got {limit!r}")
    if split is None:
        split = spec.default_split
    started = time.perf_counter()
    # (records, or None to read them from the file, origin, the part of it kept: "" whole) of each piece
    pieces: list[tuple[list | None, str, str]]
    if source is not None and source not in ("", "local"):
        if not str(source).startswith("hub:"):
            raise DataError(f"unknown source {source!r}; expected 'local' or 'hub:<dataset id>'")
        if split is None:
            raise DataError(f"source {source!r} needs a split (e.g. split='train')")
        dataset_id = str(source)[len("hub:"):]
        pieces = [(read_hub_rows(dataset_id, split, cache_dir=paths.cache_dir() / "hf_datasets"),
                   f"hub:{dataset_id}", "")]
    elif path is not None:
        pieces = [(None, str(Path(path)), "")]
    elif split is None:
        raise DataError(f"{dataset} needs a split (one of {', '.join(spec.known_splits)}) or path=...")
    else:  # every file is found before any is read: a missing one fails at once
        pieces = [(None, str(file), part) for file, part in _split_sources(dataset, split, data_dir)]

    report = LoadReport(dataset=dataset, source=" + ".join(origin for _, origin, _ in pieces), split=split)
    examples = LoadedExamples(report=report)
    seen: dict[str, int] = {}
    parse = partial(spec.parse, split=split)
    for records, origin, part in pieces:
        _load_records(read_records(Path(origin)) if records is None else records, origin, part, parse, spec,
                      examples, seen, skip_invalid, limit)
    report.examples_loaded = len(examples)
    report.seconds = time.perf_counter() - started
    if report.skipped:
        warnings.warn(report.summary(), DataWarning, stacklevel=2)
    return examples


def _load_records(records: list, origin: str, part: str, parse: Callable, spec: DatasetSpec,
                  examples: LoadedExamples, seen: dict[str, int], skip_invalid: bool, limit: int | None) -> None:
    """Parse the records of one file into ``examples`` (those of its documents in ``part``, when given)."""
    report = examples.report

    def reject(error: DataError, index: int, lost: int = 1) -> None:
        error = error.located(source=origin, index=index)
        if not skip_invalid:
            raise error
        report.skipped.append(SkippedRecord.from_error(error, lost))

    if not skip_invalid and len(records) > CHECK_FIRST_RECORDS:
        _raise_first_error(records, parse, origin, limit)
    for index, record in enumerate(records):
        if limit is not None and len(examples) >= limit:
            break
        report.records_read += 1
        if isinstance(record, DataError):
            reject(record, index)
            continue
        try:
            results = parse(record)
        except DataError as error:
            results = error
        if isinstance(results, DataError):  # rejected outside the except block: no chained traceback
            reject(results, index, spec.record_size(record))
            continue
        for result in results:
            if limit is not None and len(examples) >= limit:
                break
            if isinstance(result, DataError):
                reject(result, index)
                continue
            if part and not in_part(result["doc_id"], part):
                continue  # the other part's document
            first = seen.get(result["id"])
            if first is not None:
                reject(DataError(f"duplicate id (first seen in record {first})", record_id=result["id"],
                                 field="id"), index)
                continue
            seen[result["id"]] = index
            examples.append(make_example(result))
