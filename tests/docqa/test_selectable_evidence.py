"""Selectable evidence in the document-QA pipelines (``evidence_selection="knapsack"``): a document's table rows (the
header rows their shared fixed part) and paragraphs, a statute's subsections (a section's title line their fixed
part) as pieces; every piece kept renders today's whole document, a binding budget drops pieces and keeps the header
rows and the document's order; the program runs against the rows shown; the setting is saved only when not the
default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import DATA, HashingEmbedder, WordCounter

from knapsack_dspy.bench.suites.suite import SuiteError, suite_from_dict
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.rendering import render_paragraphs
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.pipelines.selectable_evidence import (
    OfferedDocument,
    offered_document,
    shown_document,
    statute_pieces,
)
from knapsack_dspy.docqa.pipelines.statute_retriever import StatuteRetriever
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import render_subsections
from knapsack_dspy.docqa.solvers.demo_rendering import document_inputs, render_table_field
from knapsack_dspy.docqa.solvers.document_pieces import (
    SELECTABLE,
    document_query_inputs,
    shown_rows,
    table_pieces,
)
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.modules.selectable_context import Pieces
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HEADER = [["", "2019", "2018"], ["", "$m", "$m"]]
BODY = [["Net sales", "1,318", "1,204"], ["Cost of sales", "(702)", "(655)"], ["Gross profit", "616", "549"],
        ["Capital additions", "(7,227)", "(7,321)"]]
PARAGRAPHS = ["Results of operations", "Sales grew in North America and Europe, while Asia was flat.",
              "Gross profit rose with the higher volumes."]
QUESTION = "What was the gross profit in 2019?"
STATUTES = {"7703": """§7703. Determination of marital status

(a) General rule

For purposes of part V of subchapter B of chapter 1 and those provisions of this title which refer to this subsection-

    (1) the determination of whether an individual is married shall be made as of the close of his taxable year; \
except that if his spouse dies during his taxable year such determination shall be made as of the time of such death; \
and

    (2) an individual legally separated from his spouse under a decree of divorce or of separate maintenance shall \
not be considered as married.

(b) Certain married individuals living apart

For purposes of those provisions of this title which refer to this subsection, if-

    (1) an individual who is married and who files a separate return maintains as his home a household which \
constitutes for more than one-half of the taxable year the principal place of abode of a child,

    (2) such individual furnishes over one-half of the cost of maintaining such household during the taxable year, and

    (3) during the last 6 months of the taxable year, such individual's spouse is not a member of such household,

such individual shall not be considered as married.
""", "3301": """§3301. Rate of tax

There is hereby imposed on every employer an excise tax equal to 6 percent of the total wages paid by him during the \
calendar year.
"""}


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


@pytest.fixture(scope="module")
def examples():
    return list(load_examples("tatqa", path=FIXTURES / "data_tatqa_small.json"))


def _compiled(examples, embedder, evidence_selection="knapsack", budget=4000, **settings):
    student = build_pipeline("tatqa", "pot", embedder=embedder, token_counter=WordCounter(),
                             evidence_selection=evidence_selection, budget=budget, max_exemplars=2,
                             reserve_output_tokens=40, **settings)
    return KnapsackFewShot(token_counter=student.token_counter, progress=False).compile(student, trainset=examples)


def _field(messages, name):
    return re.search(rf"\[\[ ## {name} ## \]\]\n(.*?)(?:\n\n\[\[|$)", messages[-1]["content"], re.DOTALL).group(1)


@pytest.mark.parametrize("layout", [True, False])
def test_every_piece_kept_renders_the_whole_document_and_a_subset_as_todays_rendering(layout):
    source = {"question": QUESTION, "table": HEADER + BODY, "paragraphs": PARAGRAPHS}
    today = document_inputs(source, "all", layout=layout)
    pieces = document_query_inputs({**source, SELECTABLE: True}, layout=layout)
    table, text = pieces["table"], pieces["text"]
    assert isinstance(table, Pieces) and isinstance(text, Pieces) and pieces["question"] == QUESTION
    assert table.whole() == today["table"] and text.whole() == today["text"]
    assert table.needs == (0,) * len(BODY) and len(table.fixed_texts) == 1  # the header rows: one shared part
    assert "2019" in table.fixed_texts[0] and "Gross profit" in table.texts[2]
    for kept in [(2,), (0, 3), (1, 2, 3)]:  # a subset: what today's rendering gives those rows, in table order
        assert table.show(kept) == render_table_field(HEADER + [BODY[i] for i in kept], layout=layout)
    for kept in [(1,), (0, 2)]:
        assert text.show(kept) == render_paragraphs([PARAGRAPHS[i] for i in kept])
    assert table.show(()) == "" and text.show(()) == ""
    # without the flag, or a table without a data row, it is today's plain rendering
    assert document_query_inputs(source, layout=layout) == today
    assert table_pieces(HEADER[:1], layout) == render_table_field(HEADER[:1], layout=layout)


def test_the_rows_a_prompt_showed_are_the_header_rows_and_the_rows_kept():
    table = HEADER + BODY
    assert shown_rows(table, {"table": [3, 1], "text": [0]}) == [*HEADER, BODY[1], BODY[3]]
    assert shown_rows(table, {"table": []}) == []
    assert shown_rows(table, {"text": [0]}) == table  # the table was not cut
    offered = offered_document(table, PARAGRAPHS)
    assert offered == OfferedDocument(list(range(6)), [0, 1, 2])
    assert shown_document(offered, table, {"table": [2], "text": [2, 0]}) == ([0, 1, 4], [0, 2])
    # a long document: the most similar pieces, in document order, the header rows with them
    scores = lambda texts: [1.0 if "Gross" in t or "Asia" in t else 0.0 for t in texts]  # noqa: E731
    capped = offered_document(table, PARAGRAPHS, scores, cap=2)
    assert capped == OfferedDocument([0, 1, 4], [1])
    assert shown_document(capped, table, {"table": [0], "text": []}) == ([0, 1, 4], [])


def test_the_pipeline_offers_the_whole_document_and_every_piece_kept_is_todays_prompt(examples, embedder):
    program = _compiled(examples, embedder)
    rules = _compiled(examples, embedder, evidence_selection="rules", top_n_paragraphs=None)
    query = examples[2]
    solver, _ = program._route(query.question)
    inputs = program.prompt_inputs(query, solver)
    assert isinstance(inputs["table"], Pieces) and isinstance(inputs["text"], Pieces)
    assert len(inputs["table"]) == len(query.table) - 2 and len(inputs["text"]) == len(query.paragraphs)
    shown = {}
    for name, pipeline in (("knapsack", program), ("rules", rules)):  # rules with every paragraph: the whole document
        lm = DummyLM([{"program": "ans = 1\nscale = ''", "answer": "1"}] * 4)
        target, _ = pipeline._route(query.question)
        call = pipeline._solver_query(dict(query), target)
        assert call.get("selectable", False) == (name == "knapsack")
        with dspy.context(lm=lm):
            target(**call, demos=[])  # given demos: every piece shown
        shown[name] = lm.history[-1]["messages"][-1]["content"]
    assert shown["knapsack"] == shown["rules"]


#: unpriced, the pieces worth more: with room for the whole document the knapsack shows all of it
SHOW_ALL = {"selector": "case_coverage", "evidence_weight": 4.0}


def test_a_binding_budget_drops_pieces_keeps_the_header_rows_and_the_order(examples, embedder):
    free = _compiled(examples, embedder, budget=4000, **SHOW_ALL)
    tight = _compiled(examples, embedder, budget=560, **SHOW_ALL)
    rules = _compiled(examples, embedder, evidence_selection="rules", top_n_paragraphs=None, budget=4000, **SHOW_ALL)
    query = examples[2]  # the percentage change of net sales: arithmetic over table and text
    prompts = {}
    for name, program in (("free", free), ("tight", tight), ("rules", rules)):
        lm = DummyLM([{"program": "ans = 1\nscale = ''", "answer": "x"}] * 4)
        with dspy.context(lm=lm):
            prompts[name] = (program(**program.example_inputs(query)).selection, lm.history[0]["messages"])
    offered = len(query.table) - 2 + len(query.paragraphs)
    everything, messages = prompts["free"]
    assert everything["pieces_kept"] == everything["pieces_offered"] == offered
    assert messages[-1]["content"] == prompts["rules"][1][-1]["content"]  # every piece: today's whole document
    info, messages = prompts["tight"]
    assert info["evidence_mode"] == "joint" and info["within_budget"] and info["prompt_tokens"] + 40 <= 560
    assert 1 <= info["pieces_kept"] < offered and info["pieces_offered"] == offered
    kept_rows, kept_text = info["pieces"]["table"], info["pieces"]["text"]
    assert kept_rows and kept_rows == sorted(kept_rows) and kept_text == sorted(kept_text)
    body = [list(r) for r in query.table[2:]]
    table = _field(messages, "table")  # the header rows with the rows kept, in table order
    assert table == render_table_field([list(r) for r in query.table[:2]] + [body[i] for i in kept_rows])
    assert table.splitlines()[:2] == ["(units: $m)", "| | 2019 | 2018 |"]
    assert _field(messages, "text") == render_paragraphs([query.paragraphs[i] for i in kept_text])
    assert WordCounter().count_messages(messages) == info["prompt_tokens"]
    assert tight.evidence_shown(query, info) == ([0, 1] + [2 + i for i in kept_rows], kept_text)
    assert free.evidence_shown(query, everything) == (list(range(len(query.table))), list(range(len(query.paragraphs))))


def test_the_program_runs_against_the_rows_the_prompt_showed(examples, embedder):
    query = examples[2]
    answers = {}
    for budget in (4000, 560):
        program = _compiled(examples, embedder, budget=budget, **SHOW_ALL)
        lm = DummyLM([{"program": "ans = table['Free cash flow', '2019']\nscale = ''", "answer": "x"}] * 4)
        with dspy.context(lm=lm):
            pred = program(**program.example_inputs(query))
        answers[budget] = (pred.answer, pred.selection["pieces"]["table"])
    assert answers[4000] == (4411, [0, 1, 2])  # shown: read
    answer, kept = answers[560]
    assert 2 not in kept and answer is None  # not shown: not the program's to read, though the document has it


def test_the_setting_is_saved_only_when_not_the_default(tmp_path, examples, embedder):
    rules = _compiled(examples, embedder, evidence_selection="rules")
    assert "evidence_selection" not in rules.spec.spec  # old programs' specs unchanged
    program = _compiled(examples, embedder)
    assert program.spec.spec["evidence_selection"] == "knapsack"
    path = save_program(program, tmp_path / "p.json")
    assert json.loads(path.read_text())["spec"]["evidence_selection"] == "knapsack"
    loaded = load_program(path, embedder=embedder, token_counter=WordCounter())
    assert loaded.evidence_selection == "knapsack"
    for query in examples:
        got, want = loaded.select_for(query), program.select_for(query)
        assert (got["ids"], got["pieces"], got["prompt_tokens"]) == (want["ids"], want["pieces"], want["prompt_tokens"])
    with pytest.raises(ValueError, match="zero_shot pipeline selects nothing"):
        build_pipeline("tatqa", "zero_shot", embedder=embedder, evidence_selection="knapsack")
    with pytest.raises(ValueError, match="evidence_selection must be one of"):
        build_pipeline("tatqa", "pot", embedder=embedder, evidence_selection="all")


def test_a_suite_names_the_setting_where_it_applies():
    base = {"name": "t", "dataset": "tatqa", "pipeline": "pot", "model": "openai/dummy"}
    (run,) = suite_from_dict({**base, "evidence_selection": "knapsack"}).runs
    (today,) = suite_from_dict(base).runs
    assert run.evidence_selection == "knapsack" and run.key != today.key
    assert today.key == suite_from_dict({**base, "evidence_selection": "rules"}).runs[0].key  # default: no new key
    for bad, message in [({"evidence_selection": "all"}, "evidence_selection must be one of"),
                         ({"dataset": "gsm8k", "pipeline": "cot", "evidence_selection": "knapsack"}, "has none"),
                         ({"pipeline": "zero_shot", "evidence_selection": "knapsack"}, "selects nothing")]:
        with pytest.raises(SuiteError, match=message):
            suite_from_dict({**base, **bad})


def test_a_statute_as_subsections_under_their_section_titles():
    corpus = StatuteCorpus.from_texts(STATUTES)
    ids = corpus.sort_ids(corpus.nodes)
    pieces = statute_pieces(corpus, ids)
    assert isinstance(pieces, Pieces)
    assert pieces.whole() == render_subsections(corpus, ids)  # every piece: today's text of those nodes
    # one piece per subsection ((a), (b) of 7703) and one for 3301's own text; the titles are the fixed parts
    assert len(pieces) == 3 and pieces.fixed_texts == ("§3301. Rate of tax", "§7703. Determination of marital status")
    assert pieces.needs == (0, 1, 1)
    kept = pieces.show((2,))
    assert kept.startswith("§7703. Determination of marital status\n7703(b) Certain married") and "(a)" not in kept
    assert pieces.show((0, 2)) == render_subsections(corpus, ["3301", *corpus.subtree("7703(b)")])
    # a cited subsection (mentioned_only): its ancestors' lines with it, one piece
    picked = StatuteRetriever(statutes=STATUTES)(question="Section 7703(b)(3) applies to Alice.")
    cited = statute_pieces(corpus, picked.subsection_ids)
    assert len(cited) == 1 and cited.whole() == picked.statute_text


@pytest.mark.skipif(not (DATA / "sara" / "statutes").is_dir(), reason="SARA statutes not found")
def test_statute_qa_offers_its_statute_as_pieces_and_a_plain_predictor_shows_them_all(embedder):
    rules = build_pipeline("sara", "cot", embedder=embedder, data_dir=DATA)
    program = build_pipeline("sara", "cot", embedder=embedder, data_dir=DATA, evidence_selection="knapsack")
    case = {"question": "How much tax does Alice have to pay in 2017?", "paragraphs": ["Alice was paid $33200."]}
    offered = program._query_retrieved(case)
    assert isinstance(offered["statute"], Pieces) and len(offered["statute"]) > 10
    whole = program._solver_query(case, program.solve)  # not compiled: every piece, as a string
    assert whole["statute"] == rules._retrieved(case)["statute"] == offered["statute"].whole()


def test_bench_rows_and_the_report_carry_the_prompts_parts(tmp_path, examples, embedder, monkeypatch):
    """A selection-only bench of both settings: every row has the instructions' hash and tokens and the tokens after
    them; the knapsack's rows the pieces shown and offered; report.md shows them per run."""
    from knapsack_dspy.bench.execution.runner import run_suite
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.bench.results.store import load_rows

    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: examples)
    suite = suite_from_dict({"name": "t", "dataset": "tatqa", "pipeline": "pot", "model": "openai/dummy",
                             "budget": 600, "max_exemplars": 2, "selection_only": True, "reserve_output_tokens": 40,
                             "runs": [{"evidence_selection": "rules"}, {"evidence_selection": "knapsack"}]})
    run_suite(suite, tmp_path, embedder=embedder, token_counter_factory=lambda model: WordCounter(),
              lm_factory=lambda spec: None, progress=False, log=lambda msg: None)
    rows = load_rows(tmp_path)
    by_run = {}
    for row in rows:
        by_run.setdefault(row.spec["evidence_selection"], []).append(row)
    assert set(by_run) == {"rules", "knapsack"} and all(len(v) == len(examples) for v in by_run.values())
    for row in rows:
        assert len(row.instructions_sha256) == 64 and row.instruction_tokens > 0
        assert row.tokens_after_instructions == row.prompt_tokens - row.instruction_tokens
    for rules, knapsack in zip(sorted(by_run["rules"], key=lambda r: r.example_id),
                               sorted(by_run["knapsack"], key=lambda r: r.example_id), strict=True):
        assert rules.instructions_sha256 == knapsack.instructions_sha256  # the same instructions in both arms
        assert rules.pieces_kept is None and rules.evidence_mode is None
        assert knapsack.evidence_mode == "joint" and 1 <= knapsack.pieces_kept <= knapsack.pieces_offered
        assert sum(len(v) for v in knapsack.evidence_pieces.values()) == knapsack.pieces_kept
        assert knapsack.evidence_tokens > 0
    report = (tmp_path / "report.md").read_text()
    table = report.split("Tokens and seconds per question:")[1].split("\n\n")[2].splitlines()
    assert "after the instructions" in table[0] and "pieces shown / offered" in table[0]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in table[2:]}
    (knapsack_cells,) = [c for name, c in cells.items() if c[4]]  # only the knapsack's run shows pieces
    kept = sum(r.pieces_kept for r in by_run["knapsack"]) / len(examples)
    assert knapsack_cells[4].startswith(f"{kept:.1f} / ")
