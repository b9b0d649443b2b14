"""A run's share of the work as the driver hands it to workers: the compiled program, the LM, the row fields,
and one task per (run, example).

The driver builds a :class:`RunJob` once per run (it compiles or reloads the program); workers in the driver's
process (``--workers N``: threads) use its objects directly, workers in other processes (``--ray``) rebuild them
from :meth:`RunJob.shipment`: the program's JSON state (``program_state_json``, never a pickle of live handles),
the run's spec and its row fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import dspy

from knapsack_dspy.bench.results.provenance import run_provenance
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.docqa.pipelines.pipeline import program_state_json
from knapsack_dspy.llm import make_lm
from knapsack_dspy.llm.local_models import is_local_model
from knapsack_dspy.modules.compiled_programs import pool_stores_of

__all__ = ["RunJob", "Task", "adapter_name", "default_lm", "spec_provenance"]


def default_lm(spec: RunSpec):
    """The LM a run asks unless the caller gives an ``lm_factory``: the spec's model, server and transport."""
    cache = {"cache_prompt": True} if spec.prompt_cache and is_local_model(spec.model) else {}
    return make_lm(spec.model, api_base=spec.api_base or None, max_tokens=spec.max_tokens,
                   timeout=spec.timeout, num_retries=spec.num_retries, **cache)


def adapter_name() -> str:
    """The DSPy adapter that formats the prompts (ChatAdapter unless one is configured)."""
    return type(dspy.settings.adapter or dspy.ChatAdapter()).__name__


def spec_provenance(spec: RunSpec) -> dict:
    """The provenance of the rows this process would write for ``spec`` (``bench.results.provenance``)."""
    return run_provenance(None if spec.selection_only else spec.model, adapter=adapter_name(), seed=spec.seed)


@dataclass
class RunJob:
    """One run, ready to answer its examples: ``program`` and ``lm`` (None for selection only) live in the
    driver; ``fields`` (run key, spec, provenance) go into every row of the run."""

    spec: RunSpec
    program: Any
    lm: Any
    fields: dict
    _shipment: dict | None = field(default=None, repr=False)

    @classmethod
    def for_run(cls, spec: RunSpec, program, lm, provenance: dict) -> RunJob:
        return cls(spec=spec, program=program, lm=lm,
                   fields={"run": spec.key, "spec": asdict(spec), "provenance": provenance})

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def selection_only(self) -> bool:
        return self.spec.selection_only

    def shipment(self) -> dict:
        """What a worker in another process needs to answer this run's examples (plain data, built once): the
        spec, the program's JSON state, where its pool stores are (a large pool's: a worker on this machine opens
        them there) and the row fields."""
        if self._shipment is None:
            self._shipment = {"spec": self.spec, "program_json": program_state_json(self.program),
                              "pool_store_dirs": [str(s.path.parent) for s in pool_stores_of(self.program)],
                              "fields": self.fields}
        return self._shipment


@dataclass(frozen=True)
class Task:
    """One example of one run: the unit of work (sharded by (run, example))."""

    job: RunJob
    example: Any

    @property
    def key(self) -> tuple[str, str]:
        return self.job.key, self.example.id
