"""Imported by pytest before any test module: the test process is offline, and says so before anything loads.

No test touches the network: the Hugging Face libraries are told so here (``import knapsack_dspy`` sets nothing:
``knapsack_dspy/_env.py``), before ``datasets`` / ``huggingface_hub`` read it at their import. ``knapsack_dspy``
is imported first so that its finder sets ``LITELLM_LOCAL_MODEL_COST_MAP`` right before LiteLLM loads (a test
module importing LiteLLM before it would make LiteLLM reach for its online price list).
"""

import gzip
import json
import os
import sys
from pathlib import Path

for _key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_key, "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

import knapsack_dspy  # noqa: E402, F401

# CI runs property tests derandomised: the same examples every run, so a red CI is reproducible.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def pytest_collection_modifyitems(items):
    """The ``install`` tests first, then the other ``slow`` ones: in make test's parallel pass the long tests start
    while the other worker runs quick ones, instead of the pass ending on a two-minute install (the order is
    otherwise kept)."""
    items.sort(key=lambda item: (item.get_closest_marker("install") is None, item.get_closest_marker("slow") is None))


@pytest.fixture()
def mlflow_state_restored():
    """What MLflow leaves in the process put back after the test: its tracking URI and experiment (which it writes
    into ``os.environ``) and DSPy's usage tracking (which ``mlflow.dspy.autolog`` turns on), so the next test on this
    pytest-xdist worker starts as it would alone."""
    import dspy

    saved = {name: os.environ.get(name) for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID",
                                                     "MLFLOW_EXPERIMENT_NAME")}
    track_usage = dspy.settings.track_usage
    yield
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    dspy.configure(track_usage=track_usage)


@pytest.fixture(scope="module", name="data")
def tatqa_slice():
    """A small TAT-QA slice (the real dev split): the first 90 exemplars of the pool and the first 8 tuning
    questions. Modules that use it skip without the data (``helpers.needs_tatqa``)."""
    from helpers import DATA

    from knapsack_dspy.docqa.data import load_examples

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:90]
    tune = list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:8]
    return pool, tune


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """tatqa/dev_pool.json (15 contexts) and tatqa/dev_tune.json (3 contexts) in a temporary data dir, for
    the command-line tests (test_cli_workflow, test_reliability_lm_faults)."""
    root = tmp_path_factory.mktemp("data")
    (root / "tatqa").mkdir()
    for split, n in (("dev_pool", 15), ("dev_tune", 3)):
        with gzip.open(DATA / "tatqa" / f"{split}.json.gz") as fh:
            contexts = json.loads(fh.read())[:n]
        (root / "tatqa" / f"{split}.json").write_text(json.dumps(contexts))
    return root


@pytest.fixture()
def env(tmp_path, small_data, monkeypatch):
    """The small data, a fresh cache folder and an API key in the environment; the test's folder."""
    monkeypatch.setenv("KDSPY_DATA_DIR", str(small_data))
    monkeypatch.setenv("KDSPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return tmp_path


@pytest.fixture(autouse=True)
def _no_served_model_outlives_its_test():
    """Where a test's models were served (``make_lm(..., api_base=...)`` notes it) and what those servers count with
    are forgotten after it: its stub server is gone, and the next test's model strings are counted afresh."""
    yield
    from knapsack_dspy.llm.served_models import forget_served_models
    from knapsack_dspy.llm.server_tokenizer import forget_server_tokenizers

    forget_served_models()
    forget_server_tokenizers()
