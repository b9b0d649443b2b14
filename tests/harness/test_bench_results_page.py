"""The per-question page: its data built by a pure function, embedded safely, and ``kdspy report`` end to end
(rows from a bench against the stub server, exemplars from the compiled programs, prompts re-rendered and
checked against the rows' fingerprints)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution import runner
from knapsack_dspy.bench.reporting.html_page import render_page, write_page
from knapsack_dspy.bench.reporting.page_data import build_page_data
from knapsack_dspy.bench.reporting.report_tables import report_tables
from knapsack_dspy.bench.reporting.results_page import ALL_QUESTIONS, write_results_page
from knapsack_dspy.bench.scoring.comparisons import compare_selectors
from knapsack_dspy.bench.scoring.run_metrics import aggregate
from knapsack_dspy.bench.suites.suite import suite_from_dict
from knapsack_dspy.cli.main import main
from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer, chat_adapter_reply

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
SEER, KATE = "tatqa|pot|seer|x", "tatqa|pot|kate|x"


def page_rows() -> list[dict]:
    """Four questions answered by seer and kate: seer right on q0, q1, q3, kate on q0, q2; q3's kate row could not
    ask (transient). seer's rows carry prompt fingerprints; kate's were written before them."""
    rows = []
    for run, selector, right in ((SEER, "seer", {0, 1, 3}), (KATE, "kate", {0, 2})):
        spec = {"dataset": "tatqa", "pipeline": "pot", "selector": selector, "budget": 2048, "max_exemplars": 2,
                "model": "m"}
        for i in range(4):
            row = {"run": run, "spec": spec, "example_id": f"q{i}", "doc_id": f"d{i // 2}", "gold": f"gold {i}",
                   "gold_scale": "", "answer": f"{selector} answer {i}", "correct": i in right,
                   "em": float(i in right), "f1": float(i in right), "exemplar_ids": [f"e{i}", f"e{i + 1}"],
                   "prompt_tokens": 900 if selector == "seer" else 2900, "within_budget": selector == "seer",
                   "output": f"ans = {i}  # {selector}", "error": None, "lm_calls": 1}
            if selector == "seer":
                row.update(prompt_sha256=[f"{i:064x}"], prompt_format=2)
            if selector == "kate" and i == 3:
                row.update(answer=None, output=None, error="LM x: rate limited", error_kind="transient")
            rows.append(row)
    return rows


FACTS = {("tatqa", f"q{i}"): {"question": f"What is item {i}?", "answer_type": "span" if i % 2 else "arithmetic",
                               "derivation": f"{i} + 0"} for i in range(4)}
EXEMPLARS = {f"pool:e{i}": {"id": f"e{i}", "question": f"Exemplar question {i}?", "shows": {"answer": str(i)},
                            "source": "the pool"} for i in range(6)}


def page_data(rows=None) -> dict:
    rows = rows or page_rows()
    metrics = aggregate(rows, FACTS)
    tables = report_tables(metrics, compare_selectors(rows, metrics, FACTS))
    of_row = {(r["run"], r["example_id"]): [f"pool:{e}" for e in r["exemplar_ids"]] for r in rows}
    return build_page_data(rows, metrics, tables, title="unit", facts=FACTS,
                           exemplars={**EXEMPLARS, "pool:unused": {"id": "unused"}}, exemplars_of_row=of_row,
                           plots=[{"name": "x.png", "src": "data:image/png;base64,AAAA"}],
                           not_drawn={"score_vs_M.png": "one M"}, notes=["a note"])


def test_page_data_holds_every_question_across_the_runs():
    data = page_data()
    assert [q["id"] for q in data["questions"]] == ["q0", "q1", "q2", "q3"]
    assert [r["name"] for r in data["runs"]] == ["kate", "seer"]
    q1, q3 = data["questions"][1], data["questions"][3]
    assert (q1["question"], q1["answer_type"], q1["gold"], q1["derivation"]) == ("What is item 1?", "span", "gold 1",
                                                                                 "1 + 0")
    assert q1["verdicts"] == {SEER: True, KATE: False} and q1["disagree"]
    assert not data["questions"][0]["disagree"]  # both right
    assert [q["disagree"] for q in data["questions"]] == [False, True, True, True]
    cell = q1["cells"][SEER]
    assert (cell["answer"], cell["output"], cell["prompt_tokens"], cell["within_budget"]) == (
        "seer answer 1", "ans = 1  # seer", 900, True)
    assert cell["exemplars"] == ["pool:e1", "pool:e2"] and all(k in data["exemplars"] for k in cell["exemplars"])
    assert "pool:unused" not in data["exemplars"]  # only what a row names is embedded
    # prompts: a fingerprinted row says how to re-render it; an older row that it cannot be re-rendered exactly
    assert cell["prompt"]["status"] == "not rendered" and cell["prompt"]["recorded"] == f"{1:064x}"
    assert q1["cells"][KATE]["prompt"]["status"] == "unrecorded"
    assert "cannot be re-rendered exactly" in q1["cells"][KATE]["prompt"]["detail"]
    assert "cannot be checked" in q1["cells"][KATE]["demos_note"] and "demos_note" not in cell
    assert q3["cells"][KATE]["error_kind"] == "transient" and q3["cells"][KATE]["verdict"] is False
    assert data["answer_types"] == ["arithmetic", "span"]
    assert any(t["title"] == "Paired comparisons" for t in data["tables"])
    assert data["not_drawn"] == [{"name": "score_vs_M.png", "reason": "one M"}]
    json.dumps(data)  # all of it is JSON


def test_selection_only_rows_have_verdicts_from_gold_case_hits_and_no_prompt():
    rows = [{"run": r, "spec": {"dataset": "tatqa", "selector": s, "selection_only": True}, "example_id": "q0",
             "exemplar_ids": ["e1"], "gold_case_hit": hit}
            for r, s, hit in ((SEER, "seer", True), (KATE, "kate", False))]
    (question,) = page_data(rows)["questions"]
    assert question["verdicts"] == {SEER: True, KATE: False} and question["disagree"]
    assert question["cells"][SEER]["prompt"] is None


def test_long_answers_are_clipped():
    rows = page_rows()
    rows[0]["output"] = "x" * 20_000
    cell = page_data(rows)["questions"][0]["cells"][SEER]
    assert len(cell["output"]) < 6100 and cell["output"].endswith(" …")


def test_the_page_embeds_its_data_safely_and_fetches_nothing(tmp_path):
    rows = page_rows()
    rows[0]["answer"] = "</script><script>alert('x')</script> \u2028 <!-- end"
    data = page_data(rows)
    page = render_page(data)
    block = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(block) == json.loads(json.dumps(data))  # the same data back, no element cut short
    assert page.count("</script>") == 2 and "<script>alert" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no network: nothing outside the file
    path = write_page(tmp_path / "sub" / "page.html", data)
    assert path.read_text(encoding="utf-8") == page and not list(path.parent.glob("*.tmp"))


# -- kdspy report end to end -------------------------------------------------------------------------------------

needs_data = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="data not found")


@pytest.fixture(scope="module")
def splits():
    from knapsack_dspy.docqa.data import load_examples

    return (list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:60],
            list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:4])


def _bench(out: Path, splits, monkeypatch, **fields) -> None:
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.llm import make_lm

    pool, tune = splits
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: pool if which == "pool" else tune)
    suite = suite_from_dict({"selector": ["seer", "kate"], "budget": 4000, "max_exemplars": 2,
                             "model": "openai/stub-model", "attributes": [], **fields})
    with StubOpenAIServer(reply=chat_adapter_reply(program='ans = 1\nscale = ""', answer="1")) as server:
        runner.run_suite(suite, out, embedder=HashingEmbedder(), token_counter_factory=lambda model: WordCounter(),
                         lm_factory=lambda spec: make_lm("openai/stub-model", api_base=server.base_url, api_key="x",
                                                         num_retries=0, max_tokens=spec.max_tokens),
                         progress=False, log=lambda message: None)


def _page(out: Path, **kw):
    return write_results_page(out, embedder=HashingEmbedder(), token_counter_factory=lambda model: WordCounter(),
                              log=lambda message: None, **kw)


def _page_json(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return json.loads(re.search(r'id="page-data">(.*?)</script>', text, re.S).group(1))


@needs_data
def test_report_rebuilds_the_report_and_checks_every_prompt_against_its_fingerprint(tmp_path, splits, monkeypatch):
    out = tmp_path / "results"
    _bench(out, splits, monkeypatch, route="extract_compute")
    before = (out / "predictions.jsonl").read_bytes()
    (out / "report.md").unlink()
    outcome = _page(out, prompts=ALL_QUESTIONS)
    assert (out / "predictions.jsonl").read_bytes() == before  # rows are read, never changed
    assert (out / "report.md").is_file() and outcome.page == out / "page.html"
    assert outcome.prompts == {"verified": 8}  # 2 runs x 4 questions: the re-rendered messages are those sent
    data = _page_json(outcome.page)
    rows = [json.loads(line) for line in before.decode().splitlines()]
    for row in rows:
        cell = next(q for q in data["questions"] if q["id"] == row["example_id"])["cells"][row["run"]]
        assert cell["prompt"]["status"] == "verified" and cell["prompt"]["sha256"] == row["prompt_sha256"][0]
        assert cell["prompt"]["messages"][-1]["role"] == "user"
        # the exemplars are the ones the row names, as its route's predictor showed them
        shown = [data["exemplars"][k] for k in cell["exemplars"]]
        assert [x["id"] for x in shown] == row["exemplar_ids"]
        predictor = "extract.answer" if row["route"] == "extract" else "solve.write"
        assert all(x["source"].startswith(f"compiled program ({predictor})") and x["question"] for x in shown)
        if predictor == "solve.write":
            assert all("program" in x["shows"] for x in shown)
    assert {row["route"] for row in rows} == {"extract", "compute"}
    assert data["questions"][0]["question"] == splits[1][0].question

    # without the compiled programs the page reads the exemplars from the pool, and --prompts compiles them again
    for program in (out / "programs").glob("*"):
        program.unlink()
    data = _page_json(_page(out).page)
    some = data["exemplars"][data["questions"][0]["cells"][rows[0]["run"]]["exemplars"][0]]
    assert some["source"].startswith("the pool") and some["question"]
    assert _page(out, prompts=[rows[0]["example_id"]]).prompts == {"verified": 2}
    assert len(list((out / "programs").glob("*.json"))) == 4  # two programs and their reports, rebuilt

    # a row whose fingerprint is not what its program renders is a mismatch, not a silent pass
    tampered = dict(rows[0], prompt_sha256=["0" * 64])
    lines = [json.dumps(tampered), *before.decode().splitlines()[1:]]
    (out / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    checks = _page(out, prompts=[rows[0]["example_id"]]).prompts
    assert checks == {"mismatch": 1, "verified": 1}

    # a row from before fingerprints is not re-rendered (and no program is compiled for it): it says so
    old = {k: v for k, v in rows[0].items() if k not in ("prompt_sha256", "prompt_format")}
    (out / "predictions.jsonl").write_text("\n".join([json.dumps(old), *before.decode().splitlines()[1:]]) + "\n")
    outcome = _page(out, prompts=[rows[0]["example_id"]])
    assert outcome.prompts == {"verified": 1}
    assert any("1 of the 2 rows asked for were written before rows fingerprinted" in n for n in outcome.notes)
    cell = next(q for q in _page_json(outcome.page)["questions"] if q["id"] == rows[0]["example_id"])["cells"]
    assert cell[rows[0]["run"]]["prompt"]["status"] == "unrecorded"


@needs_data
def test_report_command_writes_the_page_and_its_errors_are_one_line(tmp_path, splits, monkeypatch, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "predictions.jsonl does not exist" in capsys.readouterr().err
    out = tmp_path / "results"
    _bench(out, splits, monkeypatch)
    assert main(["report", str(out), "--prompts", "no-such-question"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no answered rows for 1 question id(s): no-such-question" in err
    assert main(["report", str(out), "-o", str(tmp_path / "elsewhere" / "p.html"), "--data-dir", str(DATA)]) == 0
    printed = capsys.readouterr().out
    assert f"page: {tmp_path / 'elsewhere' / 'p.html'}" in printed and "report: " in printed
    assert (tmp_path / "elsewhere" / "p.html").stat().st_size > 10_000
