"""``seer_finqa_match`` is SEER's FinQA check, exactly.

Two tests: the rule's consequences on hand-picked inputs (what reading ``jtonglet/SEER`` ``evaluation.py``
says, always run), and a differential test against SEER's own ``get_answer`` / ``evaluate_answer`` on
generated inputs. The differential test reads SEER's file at test time from a clone or mirror named by
``$SEER_REPO`` (a checkout, or a git directory read with ``git show``); nothing of SEER's code is kept in
this repository, and without ``$SEER_REPO`` it is skipped. Reproduce with
``SEER_REPO=/path/to/SEER pytest tests/docqa/test_metrics_seer_match.py``.
"""

from __future__ import annotations

import ast
import os
import random
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from knapsack_dspy.docqa.metrics.answer_matching import seer_finqa_match


class _Text(str):
    """A str subclass: SEER tests ``type(x) == str``, so it takes the numeric branch (and fails there)."""


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        (np.float64(0.0164), 0.01639, True),
        (np.float32(1.639), 0.01639, True),  # percent vs decimal, numpy scalar
        (np.int64(0), 0.0005, True),
        (np.int64(0), 0.02899, False),
        (complex(12.34, 0), 12.34, True),  # abs() of a complex difference: zero imaginary part
        (complex(12.34, 0.0005), 12.34, True),  # ... or a small one
        (complex(12.34, 1), 12.34, False),
        (True, "yes", True),
        (False, "no", True),
        (1, "no", False),
        ("yes", "yes", False),  # the gold yes/no is 1/0 by then: `in` raises -> wrong
        ("1", "yes", False),
        ("0.5", 0.5, False),  # text never matches a number
        ("", "abc", True),
        ("north", "north america", True),  # text within a text gold
        (_Text("abc"), "abc", False),  # a str subclass is not str to SEER
        (None, 0.0, False),
        ([1.0], 1.0, False),
        (10**400, 5.0, False),
        (Decimal("1.0"), 1.0, False),  # Decimal - float raises
        (Fraction(1, 2), 0.5, True),
        (float("nan"), 1.0, False),
        (float("inf"), 1.0, False),
        (12.344, 12.34, False),  # no rounding
    ],
)
def test_seer_rule_on_hand_picked_inputs(pred, gold, expected):
    assert seer_finqa_match(pred, gold) is expected


def _seer_source() -> str | None:
    repo = os.environ.get("SEER_REPO")
    if not repo:
        return None
    path = Path(repo)
    if (path / "evaluation.py").is_file():
        return (path / "evaluation.py").read_text()
    return subprocess.run(
        ["git", "--git-dir", str(path), "show", "HEAD:evaluation.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _seer_functions(source: str) -> dict:
    """SEER's ``get_answer`` and ``evaluate_answer``, compiled from its file (the module itself imports
    pandas and SEER's utils, so only these two function definitions are taken)."""
    tree = ast.parse(source)
    wanted = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in ("get_answer", "evaluate_answer")
    ]
    namespace: dict = {}
    code = compile(ast.Module(body=wanted, type_ignores=[]), "SEER/evaluation.py", "exec")
    exec(code, namespace)
    return namespace


def _seer_verdict(seer: dict, pred, gold) -> bool:
    """As SEER counts it: ``evaluate_answer`` returned ``True``; an exception is a wrong answer."""
    gold = seer["get_answer"]({"qa": {"exe_ans": gold}})
    try:
        return seer["evaluate_answer"](pred, gold) is True  # SEER counts `result['correct'] == True`
    except Exception:  # noqa: BLE001
        return False


def _inputs(rng: random.Random, n: int):
    golds = [
        0.01639,
        12.34,
        -5.0,
        0.0,
        100.0,
        94.0,
        0.5,
        1.0,
        2.5e6,
        "yes",
        "no",
        3,
        "north america",
        "12.34",
    ]
    for _ in range(n):
        gold = rng.choice(golds)
        base = (
            1.0 if gold in ("yes",) else 0.0 if gold == "no" else gold if not isinstance(gold, str) else 1.0
        )
        near = base + rng.choice([0, 0.0004, -0.0009, 0.001, 0.0011, 0.01, 1]) * rng.choice([1, -1])
        candidates = [
            near,
            near * 100,
            near / 100,
            int(near),
            round(near, 2),
            -near,
            float("nan"),
            float("inf"),
            np.float64(near),
            np.float32(near),
            np.int64(int(near)),
            np.bool_(bool(near)),
            np.float16(near),
            complex(near, 0),
            complex(near, rng.choice([0.0004, 0.002, 1])),
            bool(rng.randrange(2)),
            str(near),
            f"{near:.2f}",
            "yes",
            "no",
            "",
            "north",
            "america",
            "north america",
            "1",
            "0",
            _Text("north"),
            None,
            [near],
            (near,),
            Decimal(str(near)),
            Fraction(near).limit_denominator(1000),
            10**400,
            -(10**400),
        ]
        yield rng.choice(candidates), gold


@pytest.mark.skipif(
    not os.environ.get("SEER_REPO"), reason="set SEER_REPO to a clone / mirror of jtonglet/SEER"
)
def test_seer_finqa_match_agrees_with_seers_evaluation_py():
    seer = _seer_functions(_seer_source())
    rng = random.Random(0)
    n = 20_000
    disagreements = []
    for pred, gold in _inputs(rng, n):
        with np.errstate(all="ignore"):
            ours, theirs = seer_finqa_match(pred, gold), _seer_verdict(seer, pred, gold)
        if ours != theirs:
            disagreements.append((pred, gold, ours, theirs))
    assert disagreements == [], f"{len(disagreements)} of {n} differ, e.g. {disagreements[:5]}"
