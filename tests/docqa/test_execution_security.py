"""Hostile and broken programs: each is rejected or fails cleanly (``ok=False``, a one-line error), without
side effects (a canary file is never created, the working directory stays empty)."""

from __future__ import annotations

import os

import pytest

import knapsack_dspy  # noqa: F401
from knapsack_dspy.docqa.sandbox import (
    execute_finqa_program,
    execute_program,
    execute_python,
    run_official_tokens,
)

TABLE = [["", "2019", "2018"], ["Revenue", "$1,234.5", "1,000"], ["Other", "—", "-"]]

# (label, program); "{canary}" is replaced with a path the program must never create.
HOSTILE_PYTHON = [
    ("dunder import", "__import__('os').system('touch {canary}')"),
    ("import statement", "import os\nos.system('touch {canary}')"),
    ("from import", "from os import system\nsystem('touch {canary}')"),
    ("open for writing", "open('{canary}', 'w').write('x')"),
    ("with open", "with open('{canary}', 'w') as f:\n    pass"),
    ("class mro walk", "().__class__.__mro__[1].__subclasses__()"),
    ("class attribute", "ans = ().__class__"),
    ("eval", "eval(\"open('{canary}', 'w')\")"),
    ("exec", "exec('x = 1')"),
    ("compile", "compile('1', 'f', 'eval')"),
    ("getattr", "getattr(1, '__class__')"),
    ("globals", "ans = globals()"),
    ("vars", "ans = vars()"),
    ("builtins name", "ans = __builtins__"),
    ("print", "ans = print(1)"),
    ("input", "ans = input()"),
    ("type", "ans = type(1)"),
    ("range", "ans = max(range(10))"),
    ("huge power tower", "ans = 10**10**10"),
    ("nine power tower", "ans = 9**9**9"),
    ("huge list", "ans = [0]*10**9"),
    ("huge string", "ans = 'a'*10**9"),
    ("nested list bomb", "ans = [[0]*10000]*10000"),
    ("concatenation past the limit", "ans = [1]*5000 + [2]*5001"),
    ("self-nesting lists", "a = [1]\n" + "a = [a, a]\n" * 40 + "ans = a"),
    ("huge int product", "ans = 10**100 * 10**100"),
    ("huge int literal", "ans = " + "9" * 200),
    ("int from a long string", "ans = int('9' * 4000)"),
    ("shift bomb", "ans = 1 << 10**6"),
    ("invert", "ans = ~1"),
    ("deeply nested parentheses", "ans = " + "(" * 1000 + "1" + ")" * 1000),
    ("deep unary chain", "ans = " + "-" * 5000 + "1"),
    ("deep binary chain", "ans = " + "1+" * 3000 + "1"),
    ("too many statements", "x = 1\n" * 3000 + "ans = x"),
    ("while loop", "while True:\n    pass"),
    ("for loop", "for i in [1, 2]:\n    pass"),
    ("lambda recursion", "(lambda f: f(f))(lambda f: f(f))"),
    ("assigned lambda", "f = lambda: f()\nans = f()"),
    ("def recursion", "def f():\n    return f()\nans = f()"),
    ("list comprehension bomb", "ans = [x for x in range(10**9)]"),
    ("generator bomb", "L = [1] * 5000\nans = sum(1 for a in L for b in L for c in L if a == 2)"),
    ("comprehension size bomb", "L = [1] * 5000\nans = [a for a in L for b in L]"),
    ("comprehension escape", "ans = [c for c in ().__class__.__bases__]"),
    ("comprehension binds an attribute", "ans = [1 for table.loc in [1]]"),
    ("dict comprehension", "ans = {{x: x for x in [1]}}"),
    ("class", "class A:\n    pass"),
    ("try", "try:\n    ans = 1/0\nexcept Exception:\n    ans = 0"),
    ("raise", "raise ValueError('x')"),
    ("assert", "assert False"),
    ("del", "ans = 1\ndel ans"),
    ("global", "global ans\nans = 1"),
    ("async def", "async def f():\n    pass"),
    ("if statement", "if True:\n    ans = 1"),
    ("walrus", "ans = (x := 5)"),
    ("set literal", "ans = {{1, 2}}"),
    ("dict literal", "ans = {{'a': 1}}"),
    ("starred", "ans = max(*[1, 2])"),
    ("keyword argument", "ans = round(1.25, ndigits=1)"),
    ("method call", "ans = [].append(1)"),
    ("format method", "ans = '{{0.__class__}}'.format(1)"),
    ("f-string", "ans = f'{{table}}'"),
    ("percent format", "ans = '%s' % 1"),
    ("percent width bomb", "ans = '%*d' % (10**9, 1)"),
    ("table attribute", "ans = table.__dict__"),
    ("table loc attribute", "ans = table.loc.__class__"),
    ("assign to table", "table = 1"),
    ("assign to loc", "table.loc = 1"),
    ("subscript assignment", "x = [1]\nx[0] = 2"),
    ("store the table", "t = table\nans = t['Revenue', '2019']"),
    ("slice the table", "ans = table[0:10]"),
    ("unicode dunder (NFKC)", "_\ufe4dimport\ufe4d_('os')"),
    ("unicode full-width underscore", "\uff3f\uff3fimport\uff3f\uff3f('os')"),
    ("unicode eval (NFKC)", "ans = \uff45\uff56\uff41\uff4c('1')"),
    ("null byte", "ans = 1\x00"),
    ("syntax error", "ans = 1 +"),
    ("indentation error", "  ans = 1\n ans = 2"),
    ("division by zero", "ans = 1 / 0"),
    ("modulo by zero", "ans = 1 % 0"),
    ("unknown name", "ans = undefined_name"),
    ("unknown table row", "ans = table['Nope', '2019']"),
    ("unknown table column", "ans = table['Revenue', '1999']"),
    ("missing cell used", "ans = table['Other', '2019'] + 1"),
    ("NaN", "ans = float('nan')"),
    ("infinity", "ans = float('inf')"),
    ("overflowing float", "ans = 1e99 * 1e99"),
    ("complex power", "ans = (-1) ** 0.5"),
    ("complex literal", "ans = 1j"),
    ("bytes literal", "ans = b'x'"),
    ("ellipsis", "ans = ..."),
    ("round digits bomb", "ans = round(1, -10**9)"),
    ("no answer", "scale = \"million\""),
    ("function as value", "ans = max"),
    ("answer is the table", "ans = table"),
    ("empty program", "   "),
    ("not a string", None),
]

HOSTILE_FINQA = [
    ("python import", "__import__('os')"),
    ("python statement after a step", "add(1, 2); import os"),
    ("power overflow", "exp(10, 10000)"),
    ("nested calls", "exp(9, exp(9, 9))"),
    ("division by zero", "divide(1, 0)"),
    ("NaN argument", "add(nan, 1)"),
    ("infinite argument", "add(inf, 1)"),
    ("float overflow", "multiply(1e308, 10)"),
    ("complex result", "exp(-8, 0.5)"),
    ("deep parentheses", "(" * 1000),
    ("too many steps", "add(1, 2), " * 1500 + "add(1, 2)"),
    ("very long text", "add(1, 2)" + " " * 200_000),
    ("forward reference", "add(#0, 1)"),
    ("negative reference", "add(#-1, 1)"),
    ("table op without table", "table_max(Revenue, none)"),
    ("unknown row", "table_max(nope, none)"),
    ("missing cells", "table_sum(Other, none)"),
    ("arithmetic on yes/no", "greater(1, 2), add(#0, #0)"),
    ("unclosed", "add(1, 2"),
    ("unknown operation", "system(1, 2)"),
    ("empty", ""),
    ("wrong type", 12345),
]

HOSTILE_FINQA_TOKENS = [
    ("too many token steps", ["add(", "1", "2", ")"] * 10_000 + ["EOF"]),
    ("code as an argument", ["add(", "__import__('os')", "1", ")", "EOF"]),
    ("huge reference", ["add(", "#99999999999999999999", "1", ")", "EOF"]),
    ("non-string tokens", ["add(", object(), "1", ")", "EOF"]),
    ("table op on a bad table", ["table_max(", "x", "none", ")", "EOF"]),
    ("no EOF officially drops the step", ["add(", "1", "2", ")"]),
]


@pytest.fixture()
def sandbox_dir(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _assert_clean_failure(result, canary, work):
    assert result.ok is False
    assert result.answer is None
    assert isinstance(result.error, str) and result.error.strip()
    assert "\n" not in result.error
    assert not canary.exists()
    assert os.listdir(work) == []


@pytest.mark.parametrize("label, program", HOSTILE_PYTHON, ids=[label for label, _ in HOSTILE_PYTHON])
def test_hostile_python_is_rejected_cleanly(label, program, sandbox_dir, tmp_path):
    canary = tmp_path / "canary.txt"
    code = program.format(canary=canary) if isinstance(program, str) else program
    result = execute_python(code, TABLE, time_limit=1.0)
    _assert_clean_failure(result, canary, sandbox_dir)


def test_the_python_corpus_is_large_enough():
    assert len(HOSTILE_PYTHON) >= 40


@pytest.mark.parametrize("label, expected", [
    ("dunder import", "NotAllowed: method calls like '.system(...)' are not allowed (line 1)"),
    ("builtins name", "NotAllowed: dunder names like '__builtins__' are not allowed (line 1)"),
    ("import statement", "NotAllowed: import not allowed (line 1)"),
    ("class mro walk", "NotAllowed: method calls like '.__subclasses__(...)' are not allowed"),
    ("class attribute", "NotAllowed: attribute access '.__class__' is not allowed (only table.loc)"),
    ("eval", "NotAllowed: calling 'eval' is not allowed"),
    ("unicode eval (NFKC)", "NotAllowed: calling 'eval' is not allowed"),
    ("huge power tower", "LimitExceeded: power too large"),
    ("huge list", "LimitExceeded: string or list too long"),
    ("while loop", "NotAllowed: while loops not allowed"),
    ("list comprehension bomb", "NotAllowed: calling 'range' is not allowed"),
    ("generator bomb", "TimeoutError: time limit of 1 s exceeded"),
    ("comprehension size bomb", "LimitExceeded: string or list too long"),
    ("comprehension escape", "NotAllowed: attribute access '.__bases__' is not allowed"),
    ("comprehension binds an attribute", "NotAllowed: a comprehension's 'for' binds a name"),
    ("deeply nested parentheses", "SyntaxError: too many nested parentheses"),
    ("deep binary chain", "LimitExceeded"),
    ("unicode dunder (NFKC)", "NotAllowed: calling '__import__' is not allowed"),  # NFKC-normalised name
    ("NaN", "ValueError: result is not a finite number"),
    ("percent width bomb", "NotAllowed: string formatting with % is not allowed"),
    ("self-nesting lists", "LimitExceeded"),
])
def test_hostile_python_errors_say_why(label, expected):
    program = dict(HOSTILE_PYTHON)[label]
    assert execute_python(program.format(canary="x"), TABLE).error.startswith(expected)


def test_time_limit_is_enforced():
    result = execute_python("x = 1\n" * 500 + "ans = x", time_limit=0.0)
    assert not result.ok and result.error.startswith("TimeoutError: time limit of 0 s exceeded")


@pytest.mark.parametrize("label, program", HOSTILE_FINQA, ids=[label for label, _ in HOSTILE_FINQA])
def test_hostile_finqa_programs_fail_cleanly(label, program, sandbox_dir, tmp_path):
    result = execute_finqa_program(program, TABLE if "without table" not in label else None)
    _assert_clean_failure(result, tmp_path / "canary.txt", sandbox_dir)


@pytest.mark.parametrize("label, tokens", HOSTILE_FINQA_TOKENS, ids=[label for label, _ in HOSTILE_FINQA_TOKENS])
def test_hostile_finqa_token_lists_fail_cleanly(label, tokens, sandbox_dir, tmp_path):
    table = "not a table" if "bad table" in label else TABLE
    result = run_official_tokens(tokens, table)
    _assert_clean_failure(result, tmp_path / "canary.txt", sandbox_dir)


def test_bad_time_limit_is_reported():
    result = execute_python("ans = 1", time_limit=None)
    assert not result.ok and result.error.startswith("TypeError: time_limit must be a number")


def test_dispatch_never_raises_for_bad_programs():
    assert not execute_program(None, kind="python").ok
    assert not execute_program(None, kind="finqa").ok
