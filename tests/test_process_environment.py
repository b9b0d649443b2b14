"""Environment defaults set by ``import knapsack_dspy`` before third-party runtimes load."""

import os
import subprocess
import sys


def _env_after_import(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "LITELLM_LOCAL_MODEL_COST_MAP")}
    env.update(extra)
    code = ("import json, os, knapsack_dspy; "
            "print(json.dumps({k: os.environ.get(k) for k in ('OMP_WAIT_POLICY', 'LITELLM_LOCAL_MODEL_COST_MAP')}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sets_passive_openmp_waits_and_local_cost_map():
    seen = _env_after_import({})
    assert seen == {"OMP_WAIT_POLICY": "PASSIVE", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_a_users_own_setting_wins():
    seen = _env_after_import({"OMP_WAIT_POLICY": "ACTIVE"})
    assert seen["OMP_WAIT_POLICY"] == "ACTIVE"
