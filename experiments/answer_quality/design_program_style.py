"""Design experiment (issue 9): routes and program styles with the real 1.5B model on a few dev_tune questions
(from index 200 on: never the first 200, which the final evaluation uses). A self-contained prototype: it renders
its own prompts (table layout, its own demo programs and instructions), so that the variants differ only in
what is named; it decided the pipeline's program style (numbers copied) and checked extraction for span
questions. Its rows (run on 2026-11-23, commit a4ff7a4's table layout) are in
experiments/answer_quality/results/design_program_style/rows.jsonl; summarise them with --summary. Variants:
  prog_lookup  : program with table["row","col"] look-ups on the layout-rendered table (all answer types)
  prog_literal : program with literal numbers named after their cells (all answer types)
  extract      : direct answer (span / multi-span questions only)
Demos: nearest pool questions of the same route (gold answer type), no two from one document, up to 3.
Scale: decided by the document rule.  Usage: exp_routes.py VARIANT N_SPAN N_ARITH [--model M]
"""

import argparse
import collections
import json
import re
import sys
import time

import dspy
import numpy as np

from knapsack_dspy.bench.scoring.example_scores import score_prediction
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.answer_scale import decide_scale
from knapsack_dspy.docqa.data.rendering import render_paragraphs
from knapsack_dspy.docqa.number_text import parse_number
from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import clean_program_text
from knapsack_dspy.docqa.table_layout import render_layout, table_layout
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.llm import configure_cache, make_lm

if "--summary" in sys.argv:  # the paired comparison of the recorded rows (no LM)
    rows = [json.loads(line) for line in open(sys.argv[sys.argv.index("--summary") + 1])]
    by = {}
    for row in rows:
        by.setdefault(row["id"], {})[row["variant"]] = row
    for kind in ("span", "multi-span", "arithmetic"):
        both = [
            v for v in by.values() if "prog_lookup" in v and "prog_literal" in v and v["prog_lookup"]["type"] == kind
        ]
        better = sum(v["prog_literal"]["em"] > v["prog_lookup"]["em"] for v in both)
        worse = sum(v["prog_literal"]["em"] < v["prog_lookup"]["em"] for v in both)
        print(
            f"{kind}: n={len(both)} look-ups {sum(v['prog_lookup']['em'] for v in both):.0f} right, copied numbers "
            f"{sum(v['prog_literal']['em'] for v in both):.0f} right ({better} better, {worse} worse)"
        )
    spans = [v for v in by.values() if "extract" in v and "prog_lookup" in v]
    print(
        f"span + multi-span: n={len(spans)} extraction {sum(v['extract']['em'] for v in spans):.0f}, program "
        f"(look-ups) {sum(v['prog_lookup']['em'] for v in spans):.0f}, program (copied numbers) "
        f"{sum(v['prog_literal']['em'] for v in spans if 'prog_literal' in v):.0f} right"
    )
    sys.exit(0)

ap = argparse.ArgumentParser()
ap.add_argument("variant")
ap.add_argument("n_span", type=int)
ap.add_argument("n_arith", type=int)
ap.add_argument("--model", default="local/qwen2.5-coder-1.5b-instruct")
ap.add_argument("--start", type=int, default=200)
ap.add_argument("--out", default="experiments/answer_quality/results/design_program_style/rows.jsonl")
args = ap.parse_args()
SEER_NAMES = args.variant == "prog_lookup_seer"

pool = load_examples("tatqa", split="dev_pool")
tune = load_examples("tatqa", split="dev_tune")[args.start :]
spans = [e for e in tune if e.answer_type in ("span", "multi-span")][: args.n_span]
ariths = [e for e in tune if e.answer_type in ("arithmetic", "count")][: args.n_arith]
questions = spans + ariths
emb = TextEmbedder()
retriever = HybridRetriever(top_n_paragraphs=3, embedder=emb)
pool_vecs = emb.encode([e.question for e in pool])


def retrieved(e):
    t = list(e.table or [])
    p = list(e.paragraphs or [])
    ctx = retriever(question=e.question, table=t, paragraphs=p)
    return [t[i] for i in ctx.row_ids], [p[i] for i in ctx.paragraph_ids]


# ---------------------------------------------------------------------------------------------
_SNAKE = re.compile(r"[^a-z0-9]+")


def var_name(row, col, used):
    if SEER_NAMES:
        return f"table_query_{len(used)}"
    base = _SNAKE.sub("_", f"{row} {col}".lower()).strip("_")[:40].strip("_") or "value"
    if base[0].isdigit():
        base = "v_" + base
    name, k = base, 2
    while name in used and used[name] is not None:
        name = f"{base}_{k}"
        k += 1
    return name


def cells_of(layout):
    out = {}
    for row in layout.rows:
        if row.kind == "section":
            continue
        for j, c in enumerate(row.cells):
            v = parse_number(c.replace(" ", "")) if c else None
            if v is not None:
                out.setdefault(abs(v), []).append((row.label, layout.column_labels[j], v))
    return out


LIT = re.compile(r"(?P<n>\d+(?:,\d{3})+(?:\.\d+)?|\d*\.\d+|\d+)\s*(?P<p>%)?")


def program_for(e, table_rows, style):
    at = e.answer_type
    if at in ("span", "multi-span"):
        ans = e.answer if isinstance(e.answer, list) else [e.answer]
        return "ans = " + (
            json.dumps(ans[0], ensure_ascii=False)
            if at == "span" and len(ans) == 1
            else json.dumps(ans, ensure_ascii=False)
        )
    if at == "count":
        items = [i.strip() for i in (e.derivation or "").split("##") if i.strip()]
        return "ans = len(" + json.dumps(items, ensure_ascii=False) + ")" if items else f"ans = {int(e.answer_value)}"
    layout = table_layout(table_rows)
    cells = cells_of(layout)
    body = re.sub(r"[$€£¥]", "", (e.derivation or "").replace("\u2212", "-")).replace("[", "(").replace("]", ")")
    lines, names = [], {}

    def repl(m):
        v = float(m.group("n").replace(",", ""))
        if m.group("p"):
            pass
        key = (v, bool(m.group("p")))
        if key in names:
            return names[key]
        hits = cells.get(v)
        if (hits and v not in (1, 2, 3, 4, 100)) or (hits and len(hits) == 1):
            row, col, _cv = hits[0]
            name = var_name(row, col, {n: 1 for n in names.values()})
            if style == "lookup":
                lines.append(
                    f"{name} = table[{json.dumps(row, ensure_ascii=False)}, {json.dumps(col, ensure_ascii=False)}]"
                )
            else:
                lines.append(f"{name} = {m.group('n').replace(',', '')}  # {row}, {col}")
        elif v in (1, 2, 3, 4, 5, 6, 10, 12, 100, 1000):
            return m.group("n")
        else:
            name = (
                f"text_variable_{sum(1 for line in lines if line.startswith('text_variable'))}"
                if SEER_NAMES
                else f"text_number_{sum(1 for line in lines if line.startswith('text_number'))}"
            )
            lines.append(f"{name} = {m.group('n').replace(',', '')}")
        names[key] = name
        return name

    expr = LIT.sub(repl, body)
    expr = (
        re.sub(r"\(\s*([a-z_][a-z0-9_]*)\s*\)", r"(-\1)", expr)
        if re.fullmatch(r"\s*\(\s*[a-z_][a-z0-9_]*\s*\)\s*", expr) is None
        else expr
    )
    if e.scale == "percent" and not re.search(r"\*\s*100", expr) and re.search(r"/", expr):
        expr = f"({expr}) * 100"
    return "\n".join([*lines, f"ans = {expr.strip()}"])


# ---------------------------------------------------------------------------------------------
COMMON = """You are a financial analyst. Answer the question from the table and the text."""
LOOKUP_RULES = """Write a short Python program that computes the answer and stores it in `ans`.
- `table["row label", "column label"]` reads a cell by the labels shown in the table (first cell of a row, a column's heading); it returns a number.
- Copy numbers from the text as plain numbers (1234.5, no commas).
- "change from A to B" is B - A; "percentage change" is (new - old) / old * 100; a percentage is in percent units (x / total * 100).
- For a question about several items or years, `ans` is a list; for a count, `ans` is the number of items.
- Do not write units or scale: the table states them."""
LITERAL_RULES = """Write a short Python program that computes the answer and stores it in `ans`.
- Copy each number you need from the table or the text into a named variable (1234.5: no commas, "(1,234)" is -1234), with a comment saying which row and column it is.
- "change from A to B" is B - A; "percentage change" is (new - old) / old * 100; a percentage is in percent units (x / total * 100).
- For a question about several items or years, `ans` is a list; for a count, `ans` is the number of items.
- Do not write units or scale: the table states them."""
EXTRACT_RULES = """Copy the answer from the table or the text, exactly as it is written there (a name, a phrase, a number with its signs).
If the question asks for several items, give a JSON list of them, e.g. ["2019", "2018"]."""


def make_sig(kind):
    fields = {
        "table": (str, dspy.InputField(desc="the table; the line in parentheses gives its units")),
        "text": (str, dspy.InputField(desc="paragraphs of the report")),
        "question": (str, dspy.InputField()),
    }
    if kind == "extract":
        fields["answer"] = (str, dspy.OutputField(desc="the exact words, or a JSON list of them"))
        instr = COMMON + "\n" + EXTRACT_RULES
    else:
        fields["program"] = (str, dspy.OutputField(desc="Python statements that set `ans`"))
        instr = COMMON + "\n" + (LOOKUP_RULES if kind == "lookup" else LITERAL_RULES)
    return dspy.Signature(fields, instr)


def demos_for(e, route, style):
    q = emb.encode([e.question])[0]
    sims = pool_vecs @ q
    types = ("span", "multi-span") if route == "extract" else ("arithmetic", "count")
    order = np.argsort(-sims)
    chosen, docs = [], set()
    for i in order:
        p = pool[i]
        if p.answer_type not in types or p.doc_id == e.doc_id or p.doc_id in docs:
            continue
        t, paras = retrieved(p)
        d = {"table": render_layout(table_layout(t)), "text": render_paragraphs(paras), "question": p.question}
        if route == "extract":
            ans = p.answer if isinstance(p.answer, list) else [p.answer]
            d["answer"] = ans[0] if len(ans) == 1 else json.dumps(ans, ensure_ascii=False)
        else:
            prog = program_for(p, t, style)
            res = execute_program(prog, t)
            ok = res.ok and score_prediction(p, argparse.Namespace(answer=res.answer, scale=p.scale))["em"] == 1.0
            if not ok:
                continue
            d["program"] = prog
        chosen.append(dspy.Example(**d))
        docs.add(p.doc_id)
        if len(chosen) == 3:
            break
    return chosen[::-1]


configure_cache()
lm = make_lm(args.model, max_tokens=300)
dspy.configure(lm=lm)
variant = args.variant
out = open(args.out, "a")
tally = collections.Counter()
for e in questions:
    route = "extract" if (variant == "extract" and e.answer_type in ("span", "multi-span")) else "compute"
    if variant == "extract" and route == "compute":
        continue
    style = "literal" if variant == "prog_literal" else "lookup"
    if variant == "prog_lookup_seer" and e.answer_type not in ("arithmetic", "count"):
        continue
    t, paras = retrieved(e)
    sig = make_sig("extract" if route == "extract" else style)
    pred_mod = dspy.Predict(sig)
    demos = (
        demos_for(e, route, style)
        if route == "extract" or e.answer_type in ("arithmetic", "count")
        else demos_for(e, "extract", style)
    )
    if route == "compute" and e.answer_type in ("span", "multi-span"):
        # programs for span questions: demos are span programs from the same route set
        demos = [
            dspy.Example(
                table=d.table,
                text=d.text,
                question=d.question,
                program="ans = "
                + (json.dumps(d.answer, ensure_ascii=False) if not d.answer.startswith("[") else d.answer),
            )
            for d in demos
        ]
    started = time.time()
    try:
        p = pred_mod(
            table=render_layout(table_layout(t)), text=render_paragraphs(paras), question=e.question, demos=demos
        )
        err = None
    except Exception as exc:  # noqa: BLE001 - an experiment row records any failure
        p, err = None, f"{type(exc).__name__}: {exc}"[:200]
    answer = None
    used = []
    prog = None
    if p is not None and route == "extract":
        raw = (p.answer or "").strip()
        try:
            v = json.loads(raw) if raw.startswith("[") else raw
        except ValueError:
            v = raw
        answer = v
    elif p is not None:
        prog = clean_program_text(p.program)
        res = execute_program(prog, t)
        if res.ok:
            answer = res.answer
            for k, v in res.variables.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "ans":
                    used.append(abs(float(v)))
        else:
            err = res.error
    if isinstance(answer, list):
        at = "multi-span" if len(answer) > 1 else "span"
        if len(answer) == 1:
            answer = answer[0]
    elif isinstance(answer, str):
        at = "span"
    else:
        at = "count" if e.answer_type == "count" else "arithmetic"
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = round(float(answer), 4)
    d = decide_scale(
        e.question,
        at,
        answer,
        table=e.table,
        paragraphs=e.paragraphs,
        used_values=used,
        multiplied_by_100=bool(prog and re.search(r"\*\s*100\b", prog)),
    )
    s = score_prediction(e, argparse.Namespace(answer=answer, scale=d.scale))
    tally[(e.answer_type, "n")] += 1
    tally[(e.answer_type, "em")] += s["em"]
    row = {
        "variant": variant,
        "model": args.model,
        "id": e.id,
        "type": e.answer_type,
        "em": s["em"],
        "f1": s.get("f1"),
        "answer": answer,
        "scale": d.scale,
        "gold": e.answer,
        "gold_scale": e.scale,
        "program": prog,
        "raw": (p.answer if p is not None and route == "extract" else None),
        "error": err,
        "seconds": round(time.time() - started, 1),
        "n_demos": len(demos),
    }
    out.write(json.dumps(row, default=str) + "\n")
    out.flush()
    print(
        f"{e.answer_type:10s} em={s['em']:.0f} {time.time() - started:5.1f}s ans={str(answer)[:60]!r} gold={str(e.answer)[:60]!r} err={err and err[:80]}",
        flush=True,
    )
print(variant, {k: v for k, v in sorted(tally.items())})
