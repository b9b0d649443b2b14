"""Environment defaults set by ``import knapsack_dspy`` before third-party runtimes load."""

import os
import subprocess
import sys

_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "LITELLM_LOCAL_MODEL_COST_MAP")


def _env_after_import(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env.update(extra)
    code = f"import json, os, knapsack_dspy; print(json.dumps({{k: os.environ.get(k) for k in {_KEYS!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sets_short_spin_openmp_waits_and_local_cost_map():
    seen = _env_after_import({})
    assert seen == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_a_users_own_setting_wins():
    seen = _env_after_import({"OMP_WAIT_POLICY": "ACTIVE"})
    assert seen["OMP_WAIT_POLICY"] == "ACTIVE"
    assert seen["GOMP_SPINCOUNT"] is None  # ACTIVE alone keeps OpenMP's own (long) spin
    seen = _env_after_import({"OMP_WAIT_POLICY": "PASSIVE"})
    assert (seen["OMP_WAIT_POLICY"], seen["GOMP_SPINCOUNT"]) == ("PASSIVE", None)


def test_a_users_spin_count_alone_is_left_alone():
    seen = _env_after_import({"GOMP_SPINCOUNT": "50"})
    assert seen["GOMP_SPINCOUNT"] == "50"
    assert seen["OMP_WAIT_POLICY"] is None


def test_an_empty_setting_counts_as_not_set():
    seen = _env_after_import({"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": " "})
    assert (seen["OMP_WAIT_POLICY"], seen["GOMP_SPINCOUNT"]) == ("ACTIVE", "1000")
