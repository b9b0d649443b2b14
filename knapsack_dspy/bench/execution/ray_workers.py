"""Workers on a Ray cluster (``kdspy bench SUITE --ray [ADDRESS]``): one actor per worker.

The driver (the ``kdspy bench`` process) stays the only writer of ``predictions.jsonl``; actors compute rows
and return them. Per run, the driver puts the run's shipment (``RunJob.shipment``: the spec, the compiled
program's JSON state, the row fields) into Ray's object store once; an actor rebuilds the program from it the
first time it meets the run (``program_from_state``) and keeps the last few runs' programs. Each task is one
(run, example): the example travels with it, so worker nodes need none of the benchmark data.

Actors, not tasks: a Ray task asks for one CPU by default, so a 2-CPU cluster would run two LM calls at once.
An actor for an API model asks for ``API_ACTOR_CPUS`` (a fraction: its work is waiting on the network); one for
an embedded ``local/`` model asks for a whole CPU and runs llama.cpp with ``cores // workers`` threads
(unless ``KDSPY_LOCAL_THREADS`` says otherwise).

A worker that dies mid-task (its process killed, its node lost): the task goes to another actor (a new one
replaces the dead), at most ``MAX_ATTEMPTS`` times; an example that kills every worker it is given gets an
``internal`` error row instead of stopping the run. Nothing is lost (the task is retried until a row comes
back) and nothing is duplicated (the driver's ``ResultsStore`` writes each (run, example) once).

Provenance: an actor stamps its rows with its own provenance (its code, packages, model weights, adapter,
seed); the driver refuses a row whose provenance differs from the driver's (``--allow-mixed`` accepts it, and
the row says where it came from).

The LM cache: each actor uses DSPy's cache, configured like the driver's (on or off, ``--no-cache``), in
``<project cache>/lm`` on its own node. DSPy's disk cache is a diskcache ``FanoutCache`` (SQLite): safe for
the several actors of one machine, so they share answers; nodes of a cluster each have their own unless
``KDSPY_CACHE_DIR`` points every node at one folder (not on NFS: SQLite's locks are unreliable there). The
driver forwards its ``KDSPY_*`` environment variables (cache folder, local-model threads, file limits) and its
source directories (``sys.path`` entries outside the installed packages, e.g. a checkout run with
``PYTHONPATH``) to the actors.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import sysconfig
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import dspy

from knapsack_dspy.bench.execution.example_runner import example_row, failed_row
from knapsack_dspy.bench.execution.run_job import Task, default_lm, spec_provenance
from knapsack_dspy.docqa.pipelines.pipeline import program_from_state
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.llm.cache import configure_cache
from knapsack_dspy.llm.served_models import note_served_model
from knapsack_dspy.messages import one_line
from knapsack_dspy.selection.pool_store import searching

__all__ = ["API_ACTOR_CPUS", "MAX_ATTEMPTS", "RayWorkerError", "RayWorkers", "WorkerSetup"]

logger = logging.getLogger(__name__)

API_ACTOR_CPUS = 0.1  # an API model's actor waits on the network: ten fit on one CPU
MAX_ATTEMPTS = 3  # a task whose worker died this many times gets an error row
KEPT_RUNS = 2  # programs an actor keeps (runs are fed in order: the current one and the one before)
_POLL_S = 0.2


class RayWorkerError(KnapsackDspyError, RuntimeError):
    """Ray, or a worker on it, could not start or prepare a run; one line saying what and where."""


@dataclass(frozen=True)
class WorkerSetup:
    """How an actor builds what the driver was given (picklable): the embedder object (None: the program's
    default), ``token_counter_factory(model)`` and ``lm_factory(spec)`` (None: the defaults), whether the LM
    cache is on (``--no-cache``: off), and the DSPy adapter the driver formats prompts with."""

    embedder: Any = None
    token_counter_factory: Callable | None = None
    lm_factory: Callable | None = None
    lm_cache: bool = True
    adapter: Any = None  # the driver's configured DSPy adapter (None: DSPy's default)


class BenchActor:
    """The body of one Ray actor: answers tasks of any run, rebuilding each run's program once."""

    def __init__(self, setup: WorkerSetup):
        self.setup = setup
        configure_cache(enabled=setup.lm_cache)
        self._runs: OrderedDict[str, tuple] = OrderedDict()

    def ready(self) -> dict:
        """Where this actor runs (it answers once its process has started and imported the package)."""
        import ray  # present: this runs inside a Ray worker

        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address()}

    def answer(self, run_key: str, shipment_ref: list, example) -> dict:
        """The row of ``example`` in run ``run_key`` (``shipment_ref``: a one-item list holding the run's
        shipment in the object store, wrapped so that Ray hands over the reference, not the value)."""
        with dspy.context(adapter=self.setup.adapter) if self.setup.adapter is not None else nullcontext():
            try:
                program, lm, fields, spec = self._run(run_key, shipment_ref[0])
            except Exception as exc:  # noqa: BLE001 - a run this node cannot prepare stops the run, in one line
                return {"_worker_error": one_line(f"{type(exc).__name__}: {exc}")}
            return example_row(program, example, lm, fields, selection_only=spec.selection_only)

    def _run(self, run_key: str, ref) -> tuple:
        if run_key in self._runs:
            self._runs.move_to_end(run_key)
            return self._runs[run_key]
        import ray  # present: this runs inside a Ray worker

        shipment = ray.get(ref)
        spec = shipment["spec"]
        setup = self.setup
        note_served_model(spec.model, spec.api_base)  # its server counts its tokens here too
        counter = setup.token_counter_factory(spec.model) if setup.token_counter_factory else None
        with searching(*shipment.get("pool_store_dirs", ())):  # a large pool's store: where the driver has it
            program = program_from_state(json.loads(shipment["program_json"]), embedder=setup.embedder,
                                         token_counter=counter)
        lm = None if spec.selection_only else (setup.lm_factory(spec) if setup.lm_factory else default_lm(spec))
        fields = {**shipment["fields"], "provenance": spec_provenance(spec)}
        self._runs[run_key] = (program, lm, fields, spec)
        while len(self._runs) > KEPT_RUNS:
            self._runs.popitem(last=False)
        return self._runs[run_key]


def _import_ray():
    try:
        import ray  # heavy (~1 s) and optional (the "ray" extra): only --ray needs it
    except ImportError:
        raise RayWorkerError("--ray needs Ray: pip install 'knapsack-dspy[ray]'") from None
    return ray


def _source_paths() -> list[str]:
    """The driver's ``sys.path`` entries that are source directories, not installed packages or the standard
    library: what an actor needs to import the same code (a checkout on ``PYTHONPATH``, a test folder)."""
    installed = {os.path.realpath(p) for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib",
                                                                                       "purelib", "platlib")) if p}
    paths = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(path) and path not in installed and path not in paths and not any(
                part in path for part in ("site-packages", "dist-packages")) and not path.endswith(".zip"):
            paths.append(path)
    return paths


def actor_environment(workers: int, local_model: bool) -> dict[str, str]:
    """The environment variables actors get: the driver's ``KDSPY_*``, its source directories on
    ``PYTHONPATH`` (before the actor's own), and for embedded models llama.cpp threads shared out."""
    env = {key: value for key, value in os.environ.items() if key.startswith("KDSPY_")}
    env["PYTHONPATH"] = os.pathsep.join([*_source_paths(), *filter(None, [os.environ.get("PYTHONPATH")])])
    if local_model and "KDSPY_LOCAL_THREADS" not in env:
        env["KDSPY_LOCAL_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    return env


@dataclass
class _Pending:
    task: Task
    actor: Any
    shipment: Any
    attempts: int


class RayWorkers:
    """``count`` actors on the Ray cluster at ``address`` (None: a local cluster started here, stopped by
    ``close``; ``"auto"``, ``"ray://host:10001"``, ``"host:6379"``: an existing one). If this process is already
    connected to Ray (``ray.init`` was called), that cluster is used and left running."""

    def __init__(self, count: int, *, address: str | None = None, setup: WorkerSetup | None = None,
                 local_model: bool = False, log: Callable[[str], None] = logger.warning):
        if count < 1:
            raise ValueError(f"workers must be at least 1, got {count}")
        started = time.perf_counter()
        self._ray = ray = _import_ray()
        self._log = log
        self._owns_cluster = not ray.is_initialized()
        if self._owns_cluster:
            try:
                ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            except Exception as exc:  # noqa: BLE001 - Ray's many start-up failures, said in one line
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise RayWorkerError(f"could not start or reach {where}: {one_line(exc, 300)}") from None
        if local_model:  # a whole CPU per actor: never more actors than the cluster can place
            cpus = int(ray.cluster_resources().get("CPU", 1))
            if count > cpus:
                log(f"an embedded model needs a CPU per Ray worker: {cpus} workers, not {count}")
                count = max(1, cpus)
        self._remote = ray.remote(BenchActor).options(
            num_cpus=1 if local_model else API_ACTOR_CPUS, max_restarts=0,
            runtime_env={"env_vars": actor_environment(count, local_model)})
        self._setup = setup or WorkerSetup()
        self.capacity = count
        self._free: deque = deque()
        self._waiting: deque[_Pending] = deque()  # tasks whose worker died, waiting for a free actor
        self._pending: dict[Any, _Pending] = {}
        self._starting: dict[Any, Any] = {}  # ready() ref -> an actor replacing a dead one, not ready yet
        self._shipments: dict[str, Any] = {}
        self._where: dict[Any, dict] = {}
        try:
            self._free.extend(self._start_actors(count))
        except BaseException:
            self.close()
            raise
        self.startup_s = time.perf_counter() - started

    # -- actors ------------------------------------------------------------------------------------------
    def _start_actors(self, count: int) -> list:
        actors = [self._remote.remote(self._setup) for _ in range(count)]
        try:
            places = self._ray.get([actor.ready.remote() for actor in actors])
        except Exception as exc:  # noqa: BLE001 - an actor that cannot start (import error, missing package)
            for actor in actors:
                self._kill(actor)
            raise RayWorkerError(f"a Ray worker could not start: {one_line(_cause(exc), 300)}") from None
        self._where.update({actor: place for actor, place in zip(actors, places, strict=True)})
        return actors

    def _kill(self, actor) -> None:
        self._where.pop(actor, None)
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _replace(self, actor, exc: BaseException) -> None:
        """Start an actor in place of a dead one, without waiting for it: the others go on meanwhile."""
        place = self._where.get(actor, {})
        self._kill(actor)
        self._log(f"a Ray worker died (pid {place.get('pid', '?')} on {place.get('node', '?')}: "
                  f"{one_line(_cause(exc), 160)}); its example goes to another worker")
        new = self._remote.remote(self._setup)
        self._starting[new.ready.remote()] = new

    def _started(self, ref) -> None:
        actor = self._starting.pop(ref)
        try:
            self._where[actor] = self._ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - a replacement that cannot start: the cluster is broken
            self._kill(actor)
            raise RayWorkerError(f"a Ray worker could not start: {one_line(_cause(exc), 300)}") from None
        self._free.append(actor)
        self._send_waiting()

    # -- tasks -------------------------------------------------------------------------------------------
    def _shipment(self, task: Task):
        key = task.job.key
        if key not in self._shipments:
            self._shipments = {key: self._ray.put(task.job.shipment())}  # earlier runs' refs live in _Pending
        return self._shipments[key]

    def submit(self, task: Task) -> None:
        self._send(_Pending(task, None, self._shipment(task), 1))

    def _send(self, pending: _Pending) -> None:
        if not self._free:
            self._waiting.append(pending)
            return
        pending.actor = self._free.popleft()
        ref = pending.actor.answer.remote(pending.task.job.key, [pending.shipment], pending.task.example)
        self._pending[ref] = pending

    def next_row(self) -> tuple[Task, dict]:
        ray = self._ray
        while True:
            ready, _ = ray.wait([*self._pending, *self._starting], num_returns=1, timeout=_POLL_S)
            if not ready:
                continue
            if ready[0] in self._starting:
                self._started(ready[0])
                continue
            pending = self._pending.pop(ready[0])
            try:
                row = ray.get(ready[0])
            except ray.exceptions.RayActorError as exc:  # the worker died (killed, out of memory, node lost)
                self._replace(pending.actor, exc)
                if pending.attempts >= MAX_ATTEMPTS:
                    self._send_waiting()
                    return pending.task, failed_row(
                        pending.task.example, pending.task.job.fields,
                        f"the Ray worker answering this example died {pending.attempts} times (last: "
                        f"{one_line(_cause(exc), 200)})")
                pending.attempts += 1
                self._send(pending)
                self._send_waiting()
                continue
            self._free.append(pending.actor)
            self._send_waiting()
            if "_worker_error" in row:
                place = self._where.get(pending.actor, {})
                raise RayWorkerError(f"a Ray worker on {place.get('node', '?')} could not prepare run "
                                     f"{pending.task.job.key}: {row['_worker_error']}")
            return pending.task, row

    def _send_waiting(self) -> None:
        while self._waiting and self._free:
            self._send(self._waiting.popleft())

    def close(self) -> None:
        for actor in [*self._free, *self._starting.values(),
                      *(p.actor for p in self._pending.values() if p.actor is not None)]:
            self._kill(actor)
        self._free.clear()
        self._starting.clear()
        self._pending.clear()
        self._waiting.clear()
        self._shipments.clear()
        if self._owns_cluster and self._ray.is_initialized():
            self._ray.shutdown()


def _cause(exc: BaseException) -> str:
    """What a Ray error says, without Ray's multi-line preamble."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text.splitlines()[-1] if text else ''}"
