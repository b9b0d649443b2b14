"""A bench against a served model (``openai/...`` + ``api_base``): its prompts are counted by the server when the
server counts (rows: every call's counted prompt tokens equal the reported ones), else estimated; the report shows
the agreement and the cached share; ``--workers N`` runs threads, never the embedded model's path.

The server is the OpenAI stub (``tokenize="llama.cpp"``: a toy tokenizer it also reports usage with); the
embedder is ``helpers.HashingEmbedder``. The real llama.cpp server: ``test_served_model.py`` (slow).
"""

from __future__ import annotations

import pytest
from helpers import HashingEmbedder
from scaleout_helpers import HAVE_DATA, StubLM, deterministic_reply, rows_of, stub_suite, tatqa_splits

from knapsack_dspy.bench.execution import runner
from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.reporting.token_agreement import token_agreement, token_agreement_lines
from knapsack_dspy.bench.results.row_schema import as_row
from knapsack_dspy.llm import local_server
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, stub_template

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="data not found")


@pytest.fixture(scope="module")
def splits():
    return tatqa_splits(pool=30, tune=6)


def _run(out, splits, base_url, **kw):
    """The stub suite at ``base_url`` with the project's own token counting (no stand-in counter)."""
    original, run_program.load_split = run_program.load_split, lambda spec, which, data_dir: splits[which]
    try:
        return runner.run_suite(stub_suite(selector="kate", limit=6), out, embedder=HashingEmbedder(),
                                lm_factory=StubLM(base_url), progress=False, log=lambda m: None, **kw)
    finally:
        run_program.load_split = original


def test_a_server_that_counts_makes_the_budget_its_own_count(tmp_path, splits, monkeypatch):
    asked = []
    monkeypatch.setattr(runner, "request_slots", asked.append)
    with StubOpenAIServer(reply=deterministic_reply, tokenize="llama.cpp", prefix_cache=True) as server:
        _run(tmp_path, splits, server.base_url, workers=2)
        sent = {tuple(m["content"] for m in r.body["messages"]): r for r in server.completion_requests()}
    rows = rows_of(tmp_path)
    assert len(rows) == 6 and asked == [] and local_server.loaded_servers() == []  # threads; no embedded model
    for row in rows.values():
        row = as_row(row)
        assert row.token_count == "exact" and row.lm_calls == 1 and row.error is None
        assert row.reported_prompt_tokens == row.counted_prompt_tokens == [row.prompt_tokens]
        assert row.prompt_tokens_used == row.prompt_tokens
    # the stub counted each prompt with its template as it reported it: the rows' counts are the server's
    assert sorted(len(stub_template(r.body["messages"]).split()) for r in sent.values()) == sorted(
        as_row(r).prompt_tokens for r in rows.values())
    report = (tmp_path / "report.md").read_text()
    assert "## Prompt tokens: counted here and reported by the model" in report
    assert "identical on every call" in report and "| exact | 6 | 6 (100 %) |" in report


def test_a_server_that_counts_nothing_is_an_estimate_the_report_explains(tmp_path, splits):
    with StubOpenAIServer(reply=deterministic_reply) as server:
        _run(tmp_path, splits, server.base_url)
    rows = [as_row(r) for r in rows_of(tmp_path).values()]
    assert {r.token_count for r in rows} == {"estimate"}
    assert all(len(r.reported_prompt_tokens) == len(r.counted_prompt_tokens) == 1 for r in rows)
    assert any(r.reported_prompt_tokens != r.counted_prompt_tokens for r in rows)
    (figures,) = token_agreement(rows).values()
    assert figures.calls == 6 and "an estimate (another tokenizer): reported / counted" in figures.explanation()
    assert "an estimate" in (tmp_path / "report.md").read_text()


def _row(run: str, reported, counted, cached=0, used=None, token_count="exact") -> dict:
    return {"run": run, "example_id": f"q{len(reported)}{sum(x or 0 for x in reported)}", "exemplar_ids": [],
            "reported_prompt_tokens": reported, "counted_prompt_tokens": counted, "cached_prompt_tokens": cached,
            "prompt_tokens_used": sum(x or 0 for x in reported) if used is None else used,
            "token_count": token_count}


def test_the_agreement_explains_a_fixed_difference_and_shows_the_cached_share():
    rows = [_row("a", [100, None], [97, None], cached=60), _row("a", [50], [47], cached=0),
            _row("b", [10, 20], [10, 20], cached=15), _row("c", [None], [None])]
    agreement = token_agreement(rows)
    assert set(agreement) == {"a", "b"}  # run c: no call a provider answered
    assert agreement["a"].differences == [3, 3] and agreement["a"].cached_share == 60 / 150
    assert agreement["a"].explanation().startswith("reported = counted +3 on every call")
    assert agreement["b"].explanation() == "identical on every call"
    lines = token_agreement_lines(rows, {"a": {"label": "kate", "spec": {"model": "openai/m"}}})
    assert "| kate (openai/m) | exact | 2 | 0 (0 %) | reported = counted +3" in "\n".join(lines)
    assert lines[-2].endswith("| 50 % |")  # run b: 15 of 30 reported tokens cached
    assert token_agreement_lines([_row("c", [None], [None])]) == []
