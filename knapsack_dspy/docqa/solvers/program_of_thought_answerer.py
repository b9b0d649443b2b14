"""``ProgramOfThoughtAnswerer``: the LM writes a program, the sandbox runs it (SEER's answering step).

One call: the LM writes a program (SEER-style Python or the FinQA DSL) from the table, the text and
the question; :func:`knapsack_dspy.docqa.sandbox.execute_program` runs it. When the program fails (or the
LM's reply cannot be parsed) and ``retry`` is on, the LM gets ONE repair call that continues the writer's
conversation -- the writer's own prompt, its failed reply, then the error (``repair_turn``) -- so the repair
keeps the writer's system message and demos as its prompt prefix and does not evict a server's prompt cache;
a second failure is recorded in the prediction (``answer=None``, ``error=...``). Problems with
what the LM wrote never raise out of ``forward``; LM transport errors (connection, rate limit,
authentication, context overflow) do, unchanged, so that the caller can record them.

Self-consistency (``samples=n > 1``): the LM writes n programs, each call with its own DSPy ``rollout_id``
(0 .. n-1, part of DSPy's cache key, so the cache does not hand back one sample n times; not sent to the
provider) at ``temperature`` (and, for the embedded models, llama.cpp ``seed`` = the sample's index, so a run is
reproducible); each is executed and the executed answers vote (``answer_vote.majority_vote``: failed programs do
not vote; ties go to the first sample's answer). The winning sample's program and answer are the prediction's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import dspy
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.docqa.data.answer_scale import decide_scale
from knapsack_dspy.docqa.data.program_style import PROGRAM_STYLES, read_cited_cells
from knapsack_dspy.docqa.metrics.finqa_python import apply_fixes
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.sandbox.finqa_flattening import flatten_program
from knapsack_dspy.docqa.signatures import (
    WriteFinqaProgram,
    WriteFinqaPythonLookupProgram,
    WriteFinqaPythonProgram,
    WritePythonLookupProgram,
    WritePythonProgram,
)
from knapsack_dspy.docqa.solvers.answer_vote import majority_vote
from knapsack_dspy.docqa.solvers.answerer_modes import (
    DemoPredictorAccess,
    build_predictor,
    check_mode,
    demos_for_call,
    uses_reasoning,
)
from knapsack_dspy.docqa.solvers.call_plan import LMCall, Plan, PlannedAnswerer
from knapsack_dspy.docqa.solvers.demo_rendering import PARAGRAPH_MODES, program_demo
from knapsack_dspy.docqa.solvers.document_pieces import SELECTABLE, document_query_inputs, shown_rows
from knapsack_dspy.docqa.solvers.repair_turn import WriterRepair
from knapsack_dspy.docqa.table_layout import as_written, table_layout
from knapsack_dspy.llm.local_models import is_local_model
from knapsack_dspy.modules.selection_context import selection_log

__all__ = ["CONVENTIONS", "LANGUAGES", "SCALE_SOURCES", "ProgramOfThoughtAnswerer", "answer_type_of",
           "clean_program_text", "numbers_used"]

LANGUAGES = ("python", "finqa")
DEFAULT_SAMPLE_TEMPERATURE = 0.7  # self-consistency's sampling temperature unless told otherwise
SCALE_SOURCES = ("document", "program")
#: Whose answer rules a Python program's instructions state: the general ones (TAT-QA: a percentage * 100) or
#: FinQA's (a percentage as a ratio, yes / no: what its official evaluation compares with ``exe_ans``).
CONVENTIONS = ("general", "finqa")
_TIMES_100 = re.compile(r"\*\s*100(?:\.0*)?\b")
_SIGNATURES = {("python", "literal"): WritePythonProgram, ("python", "lookup"): WritePythonLookupProgram,
               ("finqa", "literal"): WriteFinqaProgram, ("finqa", "lookup"): WriteFinqaProgram}
_FINQA_PYTHON_SIGNATURES = {"literal": WriteFinqaPythonProgram, "lookup": WriteFinqaPythonLookupProgram}
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_LABEL = re.compile(r"^\s*(?:program|answer|code)\s*:\s*", re.IGNORECASE)
_FORMAT_ERROR = "the reply did not follow the required output format: no program field could be read"
MAX_SHOWN_PROGRAM = 4000  # characters of a failed program shown back to the LM


def clean_program_text(text, language: str = "python") -> str:
    """The program inside an LM reply: the first fenced block if any, a ``Program:`` label dropped;
    for the FinQA DSL the whole reply joined to one line, and nested or many-argument calls written out as the
    DSL's steps (``execution.finqa_flattening.flatten_program``: the same computation)."""
    body = "" if text is None else str(text)
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1)
    body = body.strip()
    if language == "finqa":
        body = flatten_program(_LABEL.sub("", " ".join(body.split())).strip().strip("`\"'").strip())
    elif not fenced:
        body = _LABEL.sub("", body, count=1) if _LABEL.match(body.split("\n", 1)[0]) else body
    return body


def answer_type_of(answer) -> str:
    """The kind of answer a program computed, by its form: a list -> multi-span (one item: span), a string ->
    span, a number -> arithmetic."""
    if isinstance(answer, (list, tuple)):
        return "multi-span" if len(answer) > 1 else "span"
    return "span" if isinstance(answer, str) else "arithmetic"


def numbers_used(variables: dict) -> list[float]:
    """The numbers a program bound to variables (its inputs and steps), not the answer itself."""
    out: list[float] = []
    for name, value in (variables or {}).items():
        if name in ("ans", "scale"):
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        out += [abs(float(v)) for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v)]
    return out


def _paragraph_texts(paragraphs, text) -> list[str]:
    if paragraphs is not None and not isinstance(paragraphs, str):
        return [str(p) for p in paragraphs]
    return [str(paragraphs if paragraphs is not None else text or "")]


class ProgramOfThoughtAnswerer(PlannedAnswerer, DemoPredictorAccess, dspy.Module):
    """Answer by writing a program that the sandbox executes.

    Parameters
    ----------
    language: ``"python"`` (SEER-style; ``table["row", "col"]`` look-ups, ``ans`` and ``scale``) or
        ``"finqa"`` (the FinQA DSL, official execution semantics).
    mode: ``"zero_shot"`` (no demos), ``"few_shot"`` (``dspy.Predict`` + demos), ``"cot"``
        (``dspy.ChainOfThought`` + demos) or ``"zero_shot_cot"``.
    demo_paragraphs: ``"all"`` (demos show their whole text, as queries do) or ``"gold"`` (only the gold
        evidence paragraphs, as SEER's prompts).
    retry: give the LM one more attempt, continuing the writer's conversation with its failed program and the
        error. Off by default: with the embedded 1.5B model, 62 repairs (of the former separate repair prompt)
        in the recorded TAT-QA run gave 3 programs that ran and 0 right answers.
    retry_with_demos: the repair continues the writer's prompt with the call's demos (True: the same prefix a
        prompt cache holds) or without them (a shorter prompt that shares only the system message).
    program_style: how the Python demos (and so the LM) bind numbers: ``"literal"`` (default: copied into named
        variables with their cell in a comment, ``knapsack_dspy.docqa.data.program_style``) or ``"lookup"``
        (``table["row", "col"]`` by the labels shown). The sandbox runs both either way.
    scale_from: ``"document"`` (Python programs): the answer's scale is decided from the document's units,
        the question and the numbers the program used (``knapsack_dspy.docqa.data.answer_scale.decide_scale``);
        the program's own ``scale`` is one signal, used where the document is silent. ``"program"``: the
        program's ``scale`` as written. (FinQA DSL programs have no scale.)
    execute: the executor (default ``knapsack_dspy.docqa.sandbox.execute_program``); same signature.
    time_limit: seconds one program may run.
    samples: programs sampled per question (self-consistency; 1 = one call at the LM's own settings).
    cited_cells: (Python programs) a number the program copied from a cell its comment names (the literal
        style: ``revenue_2019 = 4411  # Revenue, 2019``) is checked against that cell and, when it is another
        number, replaced by the cell's before the program runs; ``cell_fixes`` lists the replacements. The
        1.5B model copies the wrong year's cell when its demos' columns run the other way.
    temperature: the sampling temperature of those programs (``samples > 1``; default 0.7).
    conventions: (Python programs) the answer rules the instructions state: ``"general"`` (a percentage
        multiplied by 100, as TAT-QA answers it) or ``"finqa"`` (a percentage as a ratio and yes / no, as FinQA's
        gold ``exe_ans`` and its official comparison have it; ``build_pipeline`` sets it for FinQA's
        ``python_pot``). With ``"finqa"`` the executed answer also goes through FinQA's frozen mechanical fixes
        (``metrics.finqa_python.apply_fixes``: a percentage the program multiplied by 100 as a ratio, a boolean
        as yes / no; they read the question and the program, never a gold answer); ``answer_fixes`` names those
        applied. The FinQA DSL has its own instructions.

    ``forward(question, table=None, paragraphs=None, text=None, demos=None)`` ->
    ``dspy.Prediction(program, answer, scale, error, attempts, errors, reasoning, model_scale,
    scale_reason)``: ``answer`` is what the program computed (a number, a string, a list; ``None`` on
    failure), ``scale`` the answer's scale (see ``scale_from``; ``""`` for the FinQA DSL), ``model_scale``
    the program's own, ``scale_reason`` which rule decided, ``error`` the last error (``None`` on success),
    ``attempts`` 1 or 2, ``errors`` one message per failed attempt, ``reasoning`` the LM's reasoning in the
    CoT modes. ``answer_type`` (optional: span / multi-span / arithmetic / count, e.g. a router's
    prediction) tells the scale rule what kind of answer this is; without it the answer's form does.
    ``unit_paragraphs`` (optional): the text the scale rule reads the document's units from, when the prompt
    shows only part of it (``DocumentQA`` passes the whole document's paragraphs; default ``paragraphs``).
    ``table`` must be the rows of cells for ``table[...]`` look-ups to work (a rendered string is shown
    to the LM, but the program then runs without a table). ``language`` says which language the program is in.
    ``selectable=True`` (``DocumentQA(evidence_selection="knapsack")``, a compiled writer): the table's rows and the
    paragraphs go to the writer as pieces it cuts per call (``document_pieces``); the program runs against the rows
    the prompt showed, and a repair shows what the first call showed.
    With ``samples > 1`` also ``sample_answers`` (each sample's executed answer, ``None`` when it failed),
    ``sample_programs`` and ``votes`` (the winning answer's); ``attempts`` counts the LM calls; the repair call
    (``retry``) is made only when every sample failed, for the first one.
    """

    demo_module = "write"  # demos go into the program writer's prompt (its signature has reasoning in CoT modes)
    reads_units = True  # takes ``unit_paragraphs``

    def __init__(self, language: str = "python", mode: str = "few_shot", *, demo_paragraphs: str = "all",
                 retry: bool = False, retry_with_demos: bool = True, execute: Callable | None = None,
                 time_limit: float = 1.0, scale_from: str = "document", program_style: str = "literal",
                 samples: int = 1, temperature: float | None = None, cited_cells: bool = True,
                 conventions: str = "general"):
        super().__init__()
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                        or not 0 <= temperature <= 2):
            raise ValueError(f"temperature must be a number from 0 to 2, got {temperature!r}")
        self.samples = samples
        self.temperature = None if temperature is None else float(temperature)
        if language not in LANGUAGES:
            raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
        if demo_paragraphs not in PARAGRAPH_MODES:
            raise ValueError(f"demo_paragraphs must be one of {PARAGRAPH_MODES}, got {demo_paragraphs!r}")
        if program_style not in PROGRAM_STYLES:
            raise ValueError(f"program_style must be one of {PROGRAM_STYLES}, got {program_style!r}")
        if scale_from not in SCALE_SOURCES:
            raise ValueError(f"scale_from must be one of {SCALE_SOURCES}, got {scale_from!r}")
        if conventions not in CONVENTIONS:
            raise ValueError(f"conventions must be one of {CONVENTIONS}, got {conventions!r}")
        self.conventions = conventions
        self.language = language
        self.scale_from = scale_from
        self.program_style = program_style
        self.mode = check_mode(mode)
        self.demo_paragraphs = demo_paragraphs
        self.retry = bool(retry)
        self.retry_with_demos = bool(retry_with_demos)
        self.time_limit = float(time_limit)
        self.cited_cells = bool(cited_cells)
        self._execute = execute
        signature = (_FINQA_PYTHON_SIGNATURES[program_style] if language == "python" and conventions == "finqa"
                     else _SIGNATURES[language, program_style])
        self.write = build_predictor(signature, mode)

    # -- the compile contract -----------------------------------------------------------------------------
    def prompt_inputs(self, source) -> dict[str, str]:
        """The predictor's inputs for a query (an example or a mapping of its fields): the table as its layout for
        Python programs (their look-ups use its labels), as written for the FinQA DSL; with ``source["selectable"]``
        the table's rows and the paragraphs as pieces the selecting writer cuts (``document_pieces``)."""
        return document_query_inputs(source, layout=self.language != "finqa")

    def as_demo(self, example) -> dspy.Example:
        """A pool record as a demo of this solver's signature (deterministic, no LM call)."""
        return program_demo(example, language=self.language, reasoning=uses_reasoning(self.mode),
                            program_style=self.program_style,
                            paragraphs=self.demo_paragraphs, execute=self._executor())

    # -- inference ----------------------------------------------------------------------------------------
    def _executor(self) -> Callable:
        if self._execute is not None:
            return self._execute
        return execute_program

    def _run(self, program: str, rows):
        if not program.strip():
            return None, "the reply contains no program"
        if self._execute is None:
            result = self._executor()(program, rows, kind=self.language, time_limit=self.time_limit)
        else:
            result = self._execute(program, rows, kind=self.language)
        if result.ok:
            return result, None
        return None, result.error or "execution failed"

    def _plan(self, question: str, table=None, paragraphs: Iterable[str] | None = None, text: str | None = None,
              demos: Iterable | None = None, answer_type: str | None = None,
              unit_paragraphs: Iterable[str] | None = None, selectable: bool = False) -> Plan:
        """``forward`` / ``aforward`` (see the class docstring)."""
        inputs = self.prompt_inputs({"question": question, "table": table, "paragraphs": paragraphs, "text": text,
                                     SELECTABLE: selectable})
        rows = [list(row) for row in table] if isinstance(table, (list, tuple)) else None
        call_demos = demos_for_call(self.mode, demos)

        with selection_log() as selected:  # what a selecting writer chose, for the retry
            voting: dict = {}
            if self.samples > 1:
                runs = []
                for index in range(self.samples):
                    reply = yield LMCall(self.write, {**inputs, "config": self.sample_config(index)}, call_demos)
                    rows = self._shown_rows(table, rows, selected, selectable)
                    runs.append(self._read_and_run(reply, rows))
                program, reasoning, result, error, fixes, voting = self._vote(runs)
                errors: list[str] = voting.pop("errors")
            else:
                reply = yield LMCall(self.write, inputs, call_demos)
                rows = self._shown_rows(table, rows, selected, selectable)
                program, reasoning, result, error, fixes = self._read_and_run(reply, rows)
                errors = [] if result is not None else [error]
        if selected and selected[-1].inputs:  # the writer cut its pieces: the repair shows what it showed
            inputs = {**inputs, **selected[-1].inputs}
        if call_demos is None:  # the writer chose: its own demos, or (SelectingPredict) its per-query selection
            call_demos = selected[-1].demos if selected else list(self.predictor.demos)
        attempts = self.samples
        if result is None and self.retry:  # SEER-style fallback: show the LM its (first) failed program, once
            attempts += 1
            shown = program if len(program) <= MAX_SHOWN_PROGRAM else program[:MAX_SHOWN_PROGRAM] + "\n..."
            # text no provider can receive (a lone surrogate the model wrote) goes back escaped
            shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
            failed = {"program": shown or "(empty)", "reasoning": reasoning or ""}
            repair = WriterRepair(self.predictor, failed, error)
            reply = yield LMCall(repair, inputs, call_demos if self.retry_with_demos else [])
            program, reasoning, result, error, fixes = self._read_and_run(reply, rows)
            if result is None:
                errors.append(error)
        if result is None:
            return dspy.Prediction(program=program, answer=None, scale="", error=error, attempts=attempts,
                                   errors=errors, reasoning=reasoning, model_scale="", scale_reason="",
                                   language=self.language, cell_fixes=fixes, **voting)
        answer = result.answer
        layout = table_layout(rows or []) if self.language == "python" else None
        if layout is not None:
            answer = as_written(answer, layout)  # a label the program copied from the prompt, as written
        answer_fixes: list[str] = []
        if self.language == "python" and self.conventions == "finqa":  # FinQA's frozen mechanical fixes
            answer, answer_fixes = apply_fixes(question, program, answer)
        scale, reason = result.scale or "", "the program's scale"
        if layout is not None and self.scale_from == "document":
            decision = decide_scale(question, answer_type or answer_type_of(result.answer), result.answer,
                                    layout=layout,
                                    paragraphs=_paragraph_texts(paragraphs if unit_paragraphs is None
                                                                else unit_paragraphs, text),
                                    used_values=numbers_used(result.variables),
                                    multiplied_by_100=bool(_TIMES_100.search(program)), model_scale=result.scale)
            scale, reason = decision.scale, decision.reason
        return dspy.Prediction(program=program, answer=answer, scale=scale, error=None, attempts=attempts,
                               errors=errors, reasoning=reasoning, model_scale=result.scale or "",
                               scale_reason=reason, language=self.language, cell_fixes=fixes,
                               answer_fixes=answer_fixes, **voting)

    @staticmethod
    def _shown_rows(table, rows, selected, selectable: bool):
        """The rows the program runs against: those the prompt showed (a selectable table: the header rows and the
        rows the selection kept, ``document_pieces.shown_rows``), else the table given."""
        if not selectable or not selected:
            return rows
        return shown_rows(table, selected[-1].info.get("pieces"))

    def sample_config(self, index: int) -> dict:
        """The LM call settings of sample ``index``: its own ``rollout_id`` and the sampling temperature; for the
        embedded models also llama.cpp's ``seed`` (providers that do not take a seed are not sent one)."""
        temperature = DEFAULT_SAMPLE_TEMPERATURE if self.temperature is None else self.temperature
        config = {"rollout_id": index, "temperature": temperature}
        lm = dspy.settings.lm
        if is_local_model(str(getattr(lm, "model", "") or "")):
            config["seed"] = index
        return config

    @staticmethod
    def _vote(runs):
        """The first program of the winning answer among the samples' ``(program, reasoning, result, error)`` (or,
        when every sample failed, the first sample) and the vote's fields."""
        answers = [None if result is None else result.answer for _, _, result, *_ in runs]
        winner, votes = majority_vote(answers)
        voting = {"sample_answers": answers, "sample_programs": [program for program, *_ in runs], "votes": votes,
                  "errors": [error for _, _, result, error, _ in runs if result is None]}
        program, reasoning, result, error, fixes = runs[0 if winner is None else winner]
        return program, reasoning, result, error, fixes, voting

    def _read_and_run(self, reply, rows):
        """(program, reasoning, execution result or None, error, cell fixes) of one LM reply; the program is the
        one that ran: with ``cited_cells``, the numbers it copied from cells its comments name are the cells'
        (``knapsack_dspy.docqa.data.program_style.read_cited_cells``; the fixes say what changed)."""
        if isinstance(reply, AdapterParseError):
            return clean_program_text(reply.lm_response or "", self.language), None, None, _FORMAT_ERROR, []
        program = clean_program_text(reply.get("program"), self.language)
        fixes = []
        if self.cited_cells and self.language == "python" and rows:
            program, fixes = read_cited_cells(program, rows)
        result, error = self._run(program, rows)
        return program, reply.get("reasoning"), result, error, [str(fix) for fix in fixes]
