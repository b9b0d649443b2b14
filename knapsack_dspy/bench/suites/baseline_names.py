"""The names of DSPy's own optimizers that a suite may select as baselines (``selector = "dspy_knn"``, ...), and
whether each needs an LM to compile; how they compile: ``bench/programs/dspy_baselines.py``."""

from __future__ import annotations

#: name -> (needs an LM to compile, the DSPy optimizer)
DSPY_BASELINES = {"dspy_knn": (False, "KNNFewShot"), "dspy_labeled": (False, "LabeledFewShot"),
                  "dspy_bootstrap": (True, "BootstrapFewShot"),
                  "dspy_bootstrap_rs": (True, "BootstrapFewShotWithRandomSearch"),
                  "dspy_mipro0": (True, "MIPROv2")}


def is_dspy_baseline(name: str) -> bool:
    return name in DSPY_BASELINES


def needs_lm(name: str) -> bool:
    return DSPY_BASELINES[name][0]
