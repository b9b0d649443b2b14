"""The signatures: fields, output types, and that the conventions they teach hold in the sandbox."""

import re
import typing

import dspy
import pytest

from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.signatures import (
    AnswerFromTableText,
    AnswerStatuteQuestion,
    PredictAnswerType,
    PredictModality,
    WriteFinqaProgram,
    WritePythonLookupProgram,
    WritePythonProgram,
)
from knapsack_dspy.docqa.signatures.program_conventions import (
    FINQA_DSL_CONVENTIONS,
    PYTHON_CONVENTIONS,
    PYTHON_LOOKUP_CONVENTIONS,
)


@pytest.mark.parametrize("signature, inputs, outputs", [
    (AnswerFromTableText, ["table", "text", "question"], ["answer", "scale"]),
    (WritePythonProgram, ["table", "text", "question"], ["program"]),
    (WriteFinqaProgram, ["table", "text", "question"], ["program"]),
    (AnswerStatuteQuestion, ["statute", "facts", "question"], ["answer"]),
    (PredictModality, ["question", "table", "text"], ["modality"]),
    (PredictAnswerType, ["question", "table", "text"], ["answer_type"]),
])
def test_fields(signature, inputs, outputs):
    assert list(signature.input_fields) == inputs
    assert list(signature.output_fields) == outputs
    assert signature.instructions.strip()


def test_attribute_predictors_output_literals():
    modality = PredictModality.output_fields["modality"].annotation
    answer_type = PredictAnswerType.output_fields["answer_type"].annotation
    assert typing.get_origin(modality) is typing.Literal
    assert set(typing.get_args(modality)) == {"table", "text", "hybrid"}
    assert set(typing.get_args(answer_type)) == {"span", "multi-span", "count", "arithmetic"}


def test_the_python_instructions_teach_their_conventions():
    assert "# Revenue, 2019" in WritePythonProgram.instructions and "ans" in WritePythonProgram.instructions
    lookup = WritePythonLookupProgram.instructions
    for name in ("table_query_0", "text_variable_0", "ans", 'table["row label", "column label"]'):
        assert name in lookup
    assert "scale" not in WritePythonProgram.output_fields["program"].json_schema_extra.get("desc", "")
    assert FINQA_DSL_CONVENTIONS in WriteFinqaProgram.instructions


@pytest.mark.parametrize("conventions", [PYTHON_CONVENTIONS, PYTHON_LOOKUP_CONVENTIONS])
def test_the_python_example_in_the_instructions_runs(conventions):
    example = conventions.split("Example:\n", 1)[1]
    table = [["", "2019", "2018"], ["Revenue", "$4,411", "$4,044"]]
    result = execute_program(example, table, kind="python")
    assert result.ok and result.answer == pytest.approx((4411 - 4044) / 4044 * 100) and result.scale == ""


def test_the_cell_readings_the_instructions_promise():
    promised = re.findall(r'"([^"]+)" -> (-?\d+(?:\.\d+)?)', PYTHON_LOOKUP_CONVENTIONS)
    assert len(promised) == 3
    table = [["", "c"]] + [[f"r{i}", cell] for i, (cell, _) in enumerate(promised)]
    for i, (_, value) in enumerate(promised):
        assert execute_program(f'ans = table["r{i}", "c"]', table).answer == float(value)


def test_the_finqa_example_in_the_instructions_runs():
    example = FINQA_DSL_CONVENTIONS.split("Example: ", 1)[1]
    result = execute_program(example, None, kind="finqa")
    assert result.ok and result.answer == pytest.approx((5829 - 5735) / 5735, abs=1e-5)


def test_chain_of_thought_is_a_module_choice():
    cot = dspy.ChainOfThought(AnswerFromTableText)
    assert list(cot.predict.signature.output_fields) == ["reasoning", "answer", "scale"]
    assert "reasoning" not in AnswerFromTableText.output_fields
