"""Run a ``kdspy bench`` suite with the current code, answering only from DSPy's LM cache.

Every reply of an earlier run with the LM cache on is stored in the project cache (``<cache>/lm``), keyed by
the request: the model and the exact messages. This runs ``kdspy bench`` in-process with every LM call refused
(the embedded model's provider and LiteLLM's completion functions), so a question whose prompt is
byte-identical to the earlier run's gets the recorded reply and goes through today's parsing, execution, scale
and scoring, and a question whose prompt changed gets an error row (``not in the LM cache``) instead of hours
of LM time. Use it to
measure a change that happens after the LM (answer parsing, the sandbox, the scale rule) on a run that cost
LM hours, exactly as a new run would score it: the rows' ``prompt_sha256`` say the prompts are the same.

    python benchmarks/replay_cached.py benchmarks/answer_quality.toml --limit 100 --out replay
    python benchmarks/compare_runs.py replay benchmarks/results/answer_quality_1p5b --pairs seer:seer

Arguments are ``kdspy bench``'s (``--num-retries 0`` is added: a refused call is not worth retrying). Write to a
new ``--out``, not to the recorded run's directory.
"""

from __future__ import annotations

import sys

import litellm

from knapsack_dspy.llm import local_provider

REFUSAL = "replay: this prompt is not in the LM cache (the model is not called in a replay)"


def _refuse(*_args, **_kwargs):
    raise RuntimeError(REFUSAL)


async def _refuse_async(*_args, **_kwargs):
    raise RuntimeError(REFUSAL)


def main(argv: list[str]) -> int:
    if "--no-cache" in argv:
        raise SystemExit("replay_cached.py answers from the LM cache only: drop --no-cache")
    local_provider._complete = _refuse  # both completion() and acompletion() call it by this name
    # and every other provider: DSPy looks its cache up before it calls LiteLLM
    for name in ("completion", "text_completion", "responses"):
        setattr(litellm, name, _refuse)
    for name in ("acompletion", "atext_completion", "aresponses"):
        setattr(litellm, name, _refuse_async)
    from knapsack_dspy.cli.main import main as kdspy

    return kdspy(["bench", *argv, "--num-retries", "0"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
