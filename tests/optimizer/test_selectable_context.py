"""Selectable context on DSPy programs: the README's RAG example, the pieces' costs in the prompt format, the repair
of a prompt measured over its budget, the modes, the evidence budget, several selectable fields, a ``Pieces`` value
with fixed parts, and programs that declare nothing selecting and prompting exactly as before."""

import hashlib
import json
import re
import warnings
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.modules import selectable_context
from knapsack_dspy.modules.selectable_context import Pieces, PiecesError, measure_pieces
from knapsack_dspy.modules.selection_context import selection_log
from knapsack_dspy.selection.config import SelectionConfig, SelectionConfigError
from knapsack_dspy.teleprompt import KnapsackFewShot
from knapsack_dspy.teleprompt.knapsack_few_shot import ZeroShotWarning

ROOT = Path(__file__).resolve().parents[2]
RAG = "context: list[str], question -> answer"
EVIDENCE_KEYS = {"pieces", "piece_tokens", "evidence_tokens", "pieces_kept", "pieces_offered", "evidence_mode",
                 "evidence_value", "demo_value", "repaired"}
LANDS = [("France", "Paris"), ("Peru", "Lima"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Norway", "Oslo"),
         ("Egypt", "Cairo")]
PASSAGES = ["The Andes run the length of Chile and its long coast.", "Santiago is the capital of Chile.",
            "Chile exports copper and wine to many countries every year.", "Lima is the capital of Peru."]


def readme_rag_example() -> str:
    """The README's python block under "Selectable context"."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Selectable context"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def rag_trainset():
    return [dspy.Example(context=[f"{city} is the capital of {land}.", f"{land} has a coast and mountains."],
                         question=f"What is the capital of {land}?", answer=city).with_inputs("context", "question")
            for land, city in LANDS]


def compile_rag(signature=RAG, trainset=None, valset=None, **settings):
    options = dict(token_counter=WordCounter(), embedder=HashingEmbedder(), progress=False, budget=600,
                   reserve_output_tokens=60, max_exemplars=2, context_fields=("context",))
    options.update(settings)
    return KnapsackFewShot(**options).compile(dspy.ChainOfThought(signature), trainset=trainset or rag_trainset(),
                                              valset=valset)


def call(program, **inputs):
    lm = DummyLM([{"reasoning": "r", "answer": "a"}] * 4)
    with dspy.context(lm=lm), selection_log() as log:
        program(**inputs)
    return log[-1], lm.history[-1]["messages"]


def shown_field(messages, field="context"):
    return re.search(rf"\[\[ ## {field} ## \]\]\n(.*?)(?:\n\n\[\[|$)", messages[-1]["content"], re.DOTALL).group(1)


def test_the_readme_rag_example_runs_and_keeps_the_relevant_passages_in_order(monkeypatch, capsys):
    from knapsack_dspy.teleprompt import knapsack_few_shot

    lm = DummyLM([{"reasoning": "The passage says so.", "answer": "Santiago"}] * 4)
    monkeypatch.setattr(dspy, "LM", lambda *args, **kwargs: lm)
    monkeypatch.setattr(knapsack_few_shot, "TextEmbedder", HashingEmbedder)
    monkeypatch.setattr(knapsack_few_shot, "get_token_counter", lambda model, **_: WordCounter())
    previous, names = dspy.settings.lm, {}
    try:
        exec(compile(readme_rag_example(), "README.md", "exec"), names)
    finally:
        dspy.configure(lm=previous)
    passages, info = names["passages"], names["log"][0].info
    assert capsys.readouterr().out.split()[0] == "Santiago"
    kept = info["pieces"]["context"]
    assert kept and kept == sorted(kept) and 1 in kept  # at least one, in order, the most relevant among them
    prompt = lm.history[-1]["messages"]
    assert json.loads(shown_field(prompt)) == [passages[i] for i in kept]  # the original order in the prompt
    assert WordCounter().count_messages(prompt) == info["prompt_tokens"]  # the measured prompt is the one sent
    assert info["prompt_tokens"] + 256 <= 1024 and info["within_budget"]  # the default output reserve
    assert info["evidence_mode"] == "joint" and info["pieces_offered"] == 3

    # a budget that binds keeps fewer passages, still the most relevant
    program = names["rag"]
    room = info["base_tokens"] + info["evidence_tokens"] + 256
    with pytest.warns(ZeroShotWarning, match="no exemplar fits"):  # not even beside no passage: true, and said
        tight = KnapsackFewShot(max_exemplars=2, budget=int(room) - 3, context_fields=("context",), progress=False,
                                token_counter=WordCounter(), embedder=HashingEmbedder()).compile(
            dspy.ChainOfThought("context: list[str], question -> answer"), trainset=names["trainset"])
    record, messages = call(tight, context=passages, question="What is the capital of Chile?")
    fewer = record.info["pieces"]["context"]
    assert 1 <= len(fewer) < len(kept) and 1 in fewer
    assert json.loads(shown_field(messages)) == [passages[i] for i in fewer]
    assert record.info["prompt_tokens"] + 256 <= int(room) - 3
    assert program.predict.selection.config.context_fields == ("context",)


def test_a_program_that_declares_nothing_selects_and_prompts_as_before():
    """No context_fields and no Pieces: the selection is SelectExemplars' plain one for the whole inputs, the prompt
    DSPy's format of them, and the selection info has no evidence keys (as before selectable context existed)."""
    program = compile_rag(context_fields=())
    inputs = {"context": PASSAGES, "question": "What is the capital of Chile?"}
    record, messages = call(program, **inputs)
    predictor = program.predict
    costs = predictor.cost_model()
    plain = predictor.selection(base_tokens=costs.prompt_tokens(inputs, []), **inputs)
    assert record.info["ids"] == plain.ids and record.inputs == {}
    assert not EVIDENCE_KEYS & set(record.info)
    # what every prompt opens with is reported for every call (instructions' hash and tokens: arms comparable)
    system = messages[0]
    assert system["role"] == "system"
    assert record.info["instructions_sha256"] == hashlib.sha256(system["content"].encode()).hexdigest()
    assert record.info["instruction_tokens"] == costs.prefix_tokens([]) > 0
    assert messages == predictor.adapter.format(predictor.signature, [dict(d) for d in plain.demos], inputs)
    assert json.loads(shown_field(messages)) == PASSAGES
    # declaring a field the call does not give (or gives as text) changes nothing either
    other = compile_rag(signature="question -> answer", context_fields=("context",),
                        trainset=[dspy.Example(question=e.question, answer=e.answer).with_inputs("question")
                                  for e in rag_trainset()])
    record, _ = call(other, question="What is the capital of Chile?")
    assert not EVIDENCE_KEYS & set(record.info) and record.inputs == {}


def test_the_compile_checks_for_zero_shot_count_the_context_with_no_piece():
    """Validation queries whose whole context leaves no room for a demo: the call would cut the context, so the
    compile does not warn that the program is zero-shot."""
    long = [" ".join([f"{land} detail"] * 30) for land, _ in LANDS]
    valset = [dspy.Example(context=long, question=f"What is the capital of {land}?", answer=city)
              .with_inputs("context", "question") for land, city in LANDS]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroShotWarning)
        program = compile_rag(budget=600, valset=valset)
    assert program.predict.selection.compile_report["empty_selections"]["empty"] == 0
    record, _ = call(program, context=long, question="What is the capital of Chile?")
    assert record.info["ids"] and record.info["prompt_tokens"] + 60 <= 600
    assert record.info["pieces_kept"] < len(long)


def test_each_piece_is_measured_in_the_prompt_format_and_the_costs_add_up():
    """A table as Pieces: its rows need the header (a fixed part, paid once). The measured costs of any set of rows
    add up to what the rows add to the real prompt (within a token per row)."""
    header = "| year | revenue | cost |"
    rows = ["| 2019 | 120 | 80 |", "| 2020 | 150 | 90 |", "| 2021 | 170 | 95 |", "| 2022 | 210 | 120 |"]
    table = Pieces(tuple(rows), lambda kept: "\n".join([header, *(rows[i] for i in kept)]) if kept else "",
                   needs=(0, 0, 0, 0), fixed_texts=(header,))
    trainset = [dspy.Example(table=f"{header}\n| 2018 | {i} | 1 |", question=f"What was revenue in {2000 + i}?",
                             answer=str(i)).with_inputs("table", "question") for i in range(6)]
    program = compile_rag(signature="table: str, question -> answer", trainset=trainset, context_fields=())
    costs = program.predict.cost_model()
    measured = measure_pieces(costs, "table", table)
    assert measured.fixed[0] > 0 and (measured.own > 0).all()
    inputs = {"question": "What was revenue in 2021?"}
    empty = costs.prompt_tokens({**inputs, "table": table.show(())})
    for kept in [(0,), (1, 3), (0, 1, 2, 3)]:
        real = costs.prompt_tokens({**inputs, "table": table.show(kept)}) - empty
        estimate = measured.own[list(kept)].sum() + measured.fixed[0]
        assert abs(real - estimate) <= len(kept)
    # a list field's passages (a JSON list in the prompt): the same, within a token per passage
    rag = compile_rag()
    rag_costs = rag.predict.cost_model()
    passages = Pieces.of_list(PASSAGES)
    listed = measure_pieces(rag_costs, "context", passages)
    question = {"question": "What is the capital of Chile?"}
    none = rag_costs.prompt_tokens({**question, "context": []})
    for kept in [(1,), (0, 2), (0, 1, 2, 3)]:
        real = rag_costs.prompt_tokens({**question, "context": passages.show(kept)}) - none
        assert abs(real - listed.own[list(kept)].sum()) <= len(kept)
    record, messages = call(program, table=table, **inputs)
    kept = record.info["pieces"]["table"]
    assert kept and shown_field(messages, "table") == table.show(kept)
    assert 2 in kept  # the row of the year asked about: it covers the query's term
    assert record.info["prompt_tokens"] == WordCounter().count_messages(messages)


def test_a_prompt_measured_over_the_budget_is_repaired(monkeypatch):
    """Piece costs that under-count (here: every piece said to cost nothing) make the knapsack keep too much; the
    measured prompt exceeds the budget and the lowest value per token goes until it fits."""
    real = measure_pieces

    def undercounted(cost_model, name, pieces):
        measured = real(cost_model, name, pieces)
        return selectable_context.PieceCosts(measured.own * 0, measured.fixed * 0, measured.empty)

    monkeypatch.setattr(selectable_context, "measure_pieces", undercounted)
    long = [f"{text} " + " ".join(["more words about it"] * 6) for text in PASSAGES]
    program = compile_rag(budget=330)
    record, messages = call(program, context=long, question="What is the capital of Chile?")
    info = record.info
    assert info["repaired"] >= 1 and info["within_budget"]
    assert info["prompt_tokens"] + 60 <= 330 and info["prompt_tokens"] == WordCounter().count_messages(messages)
    assert info["pieces_kept"] >= 1


@pytest.mark.parametrize("mode", ["joint", "sequential", "relevance"])
def test_every_mode_keeps_the_prompt_within_the_budget(mode):
    program = compile_rag(evidence=mode, budget=420)
    record, messages = call(program, context=PASSAGES, question="What is the capital of Chile?")
    info = record.info
    assert info["evidence_mode"] == mode and info["prompt_tokens"] + 60 <= 420 and info["within_budget"]
    assert info["pieces_kept"] >= 1 and info["pieces_offered"] == 4
    assert json.loads(shown_field(messages)) == [PASSAGES[i] for i in info["pieces"]["context"]]
    assert info["evidence_value"] >= 0 and info["demo_value"] is not None
    if mode != "joint":
        assert 1 in info["pieces"]["context"]  # the most relevant passage is reserved before the demos


def test_a_selector_without_a_knapsack_falls_back_to_its_demos_first_and_says_so():
    program = compile_rag(selector="kate_within_budget")
    record, _ = call(program, context=PASSAGES, question="What is the capital of Chile?")
    info = record.info
    assert info["evidence_mode"] == "sequential_fallback" and "exposes no knapsack" in info["evidence_note"]
    assert info["demo_value"] is None and info["pieces_kept"] >= 1


def test_the_evidence_budget_caps_the_pieces():
    free, _ = call(compile_rag(budget=2000), context=PASSAGES, question="What is the capital of Chile?")
    capped, _ = call(compile_rag(budget=2000, evidence_budget=15), context=PASSAGES,
                     question="What is the capital of Chile?")
    assert capped.info["evidence_tokens"] <= 15 < free.info["evidence_tokens"]
    assert 1 <= capped.info["pieces_kept"] < free.info["pieces_kept"] and capped.info["evidence_budget"] == 15


def test_several_selectable_fields_compete_in_one_knapsack():
    trainset = [dspy.Example(context=e.context, notes=["A note."], question=e.question, answer=e.answer)
                .with_inputs("context", "notes", "question") for e in rag_trainset()]
    program = compile_rag(signature="context: list[str], notes: list[str], question -> answer", trainset=trainset,
                          context_fields=("context", "notes"))
    notes = ["Chile's capital Santiago lies in a valley.", "Peru grows potatoes."]
    record, messages = call(program, context=PASSAGES, notes=notes, question="What is the capital of Chile?")
    info = record.info
    assert set(info["pieces"]) == {"context", "notes"} and info["pieces_offered"] == 6
    assert json.loads(shown_field(messages, "notes")) == [notes[i] for i in info["pieces"]["notes"]]


def test_given_demos_show_every_piece():
    program = compile_rag()
    table = Pieces(("a b", "c d"), lambda kept: " / ".join(["a b", "c d"][i] for i in kept))
    lm = DummyLM([{"reasoning": "r", "answer": "a"}])
    with dspy.context(lm=lm):
        program.predict(context=table, question="q?", demos=[])
    assert "a b / c d" in lm.history[-1]["messages"][-1]["content"]


def test_pieces_and_the_settings_are_checked():
    with pytest.raises(PiecesError, match="needs has 1 entries for 2 pieces"):
        Pieces(("a", "b"), list, needs=(0,), fixed_texts=("h",))
    with pytest.raises(PiecesError, match="fixed part outside"):
        Pieces(("a",), list, needs=(1,), fixed_texts=("h",))
    with pytest.raises(PiecesError, match="texts must be a sequence"):
        Pieces("ab", list)
    with pytest.raises(PiecesError, match="outside"):
        Pieces.of_list(["a"]).show([3])
    assert Pieces.of_list(["x", "y", "z"]).show([2, 0]) == ["x", "z"]
    for setting, value, message in [("context_fields", "context", "list of input field names"),
                                    ("evidence", "both", "evidence must be one of"),
                                    ("evidence_solver", "cplex", "evidence_solver must be one of"),
                                    ("evidence_weight", -1, "evidence_weight must be a number >= 0"),
                                    ("evidence_budget", 0, "evidence_budget must be a positive")]:
        with pytest.raises(SelectionConfigError, match=message):
            SelectionConfig(**{setting: value})
    config = SelectionConfig(context_fields=["context"], evidence="relevance", evidence_budget=300)
    assert config.context_fields == ("context",)
    assert SelectionConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
