"""Hostile LM answers: what a broken, adversarial or glitching model could send back.

Shared by the reliability tests (``tests/harness/test_reliability_bench.py``) and the hostile-answers benchmark
(``benchmarks/hostile_answers.py``). Three families, one per kind of model output the bench scores:

- :func:`hostile_texts`: direct answers (the ``answer`` field of chain-of-thought pipelines): numbers of
  thousands of digits, infinities, lone surrogates, NUL bytes, a megabyte of text, deep brackets, ...
- :func:`hostile_python`: Python programs for the sandbox (program of thought on TAT-QA).
- :func:`hostile_finqa`: FinQA DSL programs, built from a gold program's own arguments where that makes them
  costly to compare (continued fractions and chains of 20-1000 steps, expressions that double per step).

Each is a list of ``(name, text)``; :func:`stub_reply` turns a text into what the OpenAI stub server sends.
"""

from __future__ import annotations

import re

from knapsack_dspy.testing.openai_stub_server import chat_adapter_reply

_SURROGATE = "\ud800"


def hostile_texts() -> list[tuple[str, str]]:
    out = [
        ("digits_401", "1" + "0" * 400),
        ("digits_5000", "9" * 5000),
        ("negative_digits_5000", "-" + "9" * 5000),
        ("digits_310_fraction", "1" * 310 + ".5"),
        ("accounting_400", "(" + "9" * 400 + ")"),
        ("dollars_400", "$" + "9" * 400),
        ("percent_400", "9" * 400 + "%"),
        ("commas_2000", "1," * 2000 + "1"),
        ("exp_309", "1e309"),
        ("exp_minus_309", "-1e309"),
        ("exp_tiny", "1e-400"),
        ("exp_huge", "1e999999999"),
        ("nan", "nan"),
        ("inf", "inf"),
        ("minus_inf", "-inf"),
        ("nan_percent", "NaN%"),
        ("zero", "0"),
        ("minus_zero", "-0"),
        ("zero_exp", "0.0e0"),
        ("arabic_digit", "\u0663"),
        ("fullwidth", "\uff11\uff12\uff13"),
        ("underscore", "1_000"),
        ("hex", "0x1F"),
        ("signs", "+-1"),
        ("double_minus", "--1"),
        ("dots", "1..2"),
        ("dot", "."),
        ("dash", "-"),
        ("percent", "%"),
        ("dollar", "$"),
        ("parens", "()"),
        ("empty_list", "[]"),
        ("empty_object", "{}"),
        ("null", "null"),
        ("true", "true"),
        ("none", "None"),
        ("surrogate", _SURROGATE),
        ("surrogate_inside", "a" + _SURROGATE + "b"),
        ("low_surrogates", "\udfff" * 10),
        ("nul", "\x00"),
        ("nul_inside", "a\x00b"),
        ("escape_codes", "\x1b[2J\x1b[31mred"),
        ("rtl", "\u202e1234"),
        ("math_digit", "\U0001d7d8"),
        ("bom", "\ufeff42"),
        ("crlf", "\r\n\r\n"),
        ("megabyte", "A" * 1_000_000),
        ("many_words", "word " * 100_000),
        ("deep_open", "[" * 100_000),
        ("deep_close", "]" * 1000),
        ("deep_list", '["a", ' * 1000 + '"b"' + "]" * 1000),
        ("json_list", "[1, 2, 3]"),
        ("long_span_list", '["' + "x" * 10_000 + '"]'),
        ("sql", "' OR 1=1 --"),
        ("html", "<script>alert(1)</script>"),
        ("template", "{{7*7}}"),
        ("format", "%s%s%s%n"),
        ("jndi", "${jndi:ldap://x}"),
        ("path", "..\\..\\etc\\passwd"),
        ("backslash", "\\"),
        ("quote", '"'),
        ("triple_quote", "'''"),
        ("emoji", "\U0001f4a5" * 100),
        ("combining", "e\u0301" * 1000),
        ("yes", "yes"),
        ("list_of_numbers", '["1e400", "9' + "9" * 4400 + '"]'),
    ]
    return out


def hostile_python() -> list[tuple[str, str]]:
    return [
        ("power_tower", "ans = 10**10**10"),
        ("big_repeat", "ans = '1' * 10**9"),
        ("import", "import os\nans = 1"),
        ("long_label", "ans = table['" + "x" * 10_000 + "', '2019']"),
        ("loop", "while True:\n    pass"),
        ("deep_parens", "ans = " + "(" * 1000 + "1" + ")" * 1000),
        ("long_constant", "ans = const_" + "1" * 5000),
        ("surrogate", 'ans = "' + _SURROGATE + '"'),
        ("nul", "ans = 1\x00"),
        ("nested_lists", "ans = " + "[" * 25 + "1" + "]" * 25),
        ("nine_tower", "ans = 9**9**9"),
        ("nan", "ans = float('nan')"),
        ("division_by_zero", "ans = 1/0"),
        ("minus_zero", "ans = -0.0"),
        ("too_long", "x = 1\n" * 5000),
        ("many_additions", "ans = " + "1+" * 4000 + "1"),
        ("big_sum", "ans = sum([1]*10000)"),
        ("table_index", "ans = table[0]"),
        ("bad_scale", "ans = 1\nscale = 'lots'"),
        ("nested_fences", "```python\n```python\nans = 1\n```\n```"),
        ("dunder", "ans = ().__class__.__mro__"),
        ("huge_int_literal", "ans = " + "9" * 5000),
        ("huge_float", "ans = 1e308 * 10"),
        ("string_answer", "ans = '" + "z" * 9000 + "'"),
    ]


def _arguments(gold_program: str) -> list[str]:
    """The gold program's number / constant arguments (what a costly prediction must reuse to be compared)."""
    args = [a.strip() for a in re.findall(r"[(,]\s*([^,()#]+?)\s*(?=[,)])", gold_program or "")]
    args = [a for a in args if a and a != "none"]
    return args or ["1", "2"]


def _alternating(args: list[str], steps: int, first: str, odd: str, even: str) -> str:
    """A chain of ``steps`` steps: ``first``, then ``odd`` / ``even`` in turn, each on the step before
    (``{a}`` / ``{b}``: the first and last gold argument, ``{p}``: the previous step)."""
    a, b = args[0], args[-1]
    parts = [first.format(a=a, b=b)]
    for i in range(1, steps):
        parts.append((odd if i % 2 else even).format(a=a, b=b, p=f"#{i - 1}"))
    return ", ".join(parts)


def _continued_fraction(args: list[str], steps: int) -> str:
    return _alternating(args, steps, "divide({a}, {b})", "add({b}, {p})", "divide({a}, {p})")


def _chain(args: list[str], steps: int) -> str:
    return _alternating(args, steps, "add({a}, {b})", "multiply({p}, {b})", "add({p}, {a})")


def _doubling(args: list[str], rounds: int) -> str:
    a, b = args[0], args[-1]
    parts = [f"divide({a}, {b})"]
    for _ in range(rounds):
        x = len(parts) - 1
        parts += [f"divide({a}, #{x})", f"divide(#{x}, {b})", f"add(#{x + 1}, #{x + 2})"]
    return ", ".join(parts)


def hostile_finqa(gold_program: str) -> list[tuple[str, str]]:
    args = _arguments(gold_program)
    return [
        ("continued_fraction_40", _continued_fraction(args, 40)),
        ("chain_40", _chain(args, 40)),
        ("continued_fraction_20", _continued_fraction(args, 20)),
        ("chain_20", _chain(args, 20)),
        ("doubling_5", _doubling(args, 5)),
        ("doubling_12", _doubling(args, 12)),
        ("steps_1000", ", ".join(["add(1, 2)"] + [f"add(#{i - 1}, 1)" for i in range(1, 1000)])),
        ("long_number", "add(" + "1" * 5000 + ", 2)"),
        ("long_constant", "add(const_" + "9" * 5000 + ", 2)"),
        ("long_reference", "add(1, 2), add(#" + "9" * 5000 + ", 1)"),
        ("garbage", "}{)(,,,#"),
        ("empty", ""),
        ("division_by_zero", "divide(1, 0)"),
        ("overflow", "exp(10, 400)"),
        ("long_row", "table_max(" + "x" * 10_000 + ", none)"),
        ("nested_parens", "add(" * 500 + "1" + ")" * 500),
        ("surrogate", f"add({_SURROGATE}, 1)"),
        ("gold", gold_program or "add(1, 2)"),
        ("gold_commuted_repeat", ", ".join([gold_program or "add(1, 2)"] * 3)),
    ]


def stub_reply(text: str) -> str:
    """The stub server's reply carrying ``text`` in every output field a bench pipeline reads."""
    return chat_adapter_reply(reasoning="hostile", program=text, answer=text, scale="")


def reply_by_question(questions: dict):
    """A stub server ``reply``: the hostile text assigned to the question of the request (``questions``:
    question text -> hostile text), a marker text for any other question."""

    def reply(body):
        last = body["messages"][-1]["content"] if isinstance(body, dict) else ""
        for question, text in questions.items():
            if f"[[ ## question ## ]]\n{question}" in last:
                return stub_reply(text)
        return stub_reply("(no hostile answer for this question)")

    return reply
