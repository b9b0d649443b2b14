"""The per-question page as one self-contained HTML file: inline CSS and JavaScript, the data embedded as JSON
(``<script type="application/json" id="page-data">``, built by ``bench.reporting.page_data``), plots as PNG data URIs.
No server, no network: it opens from disk in any browser.

The page shows the report's tables and plots, then every question across the runs (question, answer type,
gold, each run's answer, right or wrong, prompt tokens), filterable by answer type, by "runs disagree", by
"right in run A" / "wrong in run B" (on which questions does SEER beat KATE?), by text, with run columns shown
or hidden. A click on a question opens the runs side by side: each one's exemplars (their questions and the
demo the prompt showed), its program or reasoning, answer, error, and its prompt: re-rendered and checked
against the row's fingerprint when ``kdspy report --prompts`` was asked, else the fingerprint's status.
"""

from __future__ import annotations

import base64
import html
import json
import os
import tempfile
from pathlib import Path

__all__ = ["plot_data_uri", "render_page", "write_page"]


def plot_data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI (embedded in the page: nothing is fetched)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _embedded_json(data: dict) -> str:
    """JSON safe inside a <script> element (as Django's ``json_script``): ``<``, ``>`` and ``&`` as ``\\u`` escapes
    (no "</script>" or "<!--" can end or confuse the element) and U+2028 / U+2029 escaped; still valid JSON."""
    text = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def render_page(data: dict) -> str:
    """The page's HTML for ``data`` (``page_data.build_page_data``)."""
    return (_TEMPLATE.replace("%TITLE%", html.escape(str(data.get("title", "results"))))
            .replace("%CSS%", _CSS).replace("%JS%", _JS).replace("%DATA%", _embedded_json(data)))


def write_page(path: str | os.PathLike, data: dict) -> Path:
    """Write the page atomically (a temporary file, then a rename): a reader never sees half a page."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(render_page(data))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%TITLE%</title>
<style>%CSS%</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <p id="generated" class="muted"></p>
  <ul id="notes"></ul>
  <nav><a href="#summary">Summary</a> · <a href="#plots">Plots</a> · <a href="#questions">Questions</a></nav>
</header>
<section id="summary"><h2>Summary</h2><div id="tables"></div></section>
<section id="plots"><h2>Plots</h2><div id="plot-list"></div><ul id="not-drawn"></ul></section>
<section id="questions">
  <h2>Questions</h2>
  <p class="help">Each row is one question; each run's column shows its answer, ✓ right / ✗ wrong, and its prompt
  tokens. Click a row to see the runs side by side: the exemplars each one chose (their questions and demos),
  its program or reasoning, and its prompt. To see where one selector beats another, choose it under
  <em>right in</em> and the other under <em>wrong in</em>.</p>
  <div id="filters">
    <label>answer type <select id="f-type"><option value="">all</option></select></label>
    <label><input type="checkbox" id="f-disagree"> only where runs disagree</label>
    <label>right in <select id="f-right"><option value="">any run</option></select></label>
    <label>wrong in <select id="f-wrong"><option value="">any run</option></select></label>
    <label>search <input type="search" id="f-text" placeholder="question, id, answer"></label>
    <span id="f-runs"></span>
    <span id="count"></span>
  </div>
  <table id="qtable"><thead></thead><tbody></tbody></table>
</section>
<script type="application/json" id="page-data">%DATA%</script>
<script>%JS%</script>
</body>
</html>
"""

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 1.5rem 3rem; color: #1d2330; }
h1 { font-size: 1.5rem; margin: 1rem 0 .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
h3 { font-size: 1rem; margin: 1.4rem 0 .4rem; }
.muted, .help { color: #5b6475; } .help { max-width: 60rem; }
nav a { color: #2456a6; }
table { border-collapse: collapse; margin: .4rem 0 1rem; }
th, td { border-bottom: 1px solid #e2e5eb; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f5f8; }
.report-table td:not(:first-child) { font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #5b6475; max-width: 60rem; margin: .2rem 0; }
#plot-list figure { display: inline-block; margin: 0 1rem 1rem 0; vertical-align: top; }
#plot-list img { max-width: 100%; border: 1px solid #e2e5eb; }
#plot-list figcaption { color: #5b6475; font-size: .85rem; }
#filters { display: flex; flex-wrap: wrap; gap: .5rem 1.2rem; align-items: center; padding: .6rem;
  background: #f3f5f8; border-radius: 6px; position: sticky; top: 0; z-index: 2; }
#count { font-weight: 600; margin-left: auto; }
#qtable tr.q { cursor: pointer; } #qtable tr.q:hover { background: #f7f9fc; }
#qtable tr.q.open { background: #eef3fb; }
#qtable td.question { max-width: 32rem; }
.right { color: #17803d; font-weight: 600; } .wrong { color: #b42318; font-weight: 600; }
.unknown { color: #5b6475; }
.answer { max-width: 14rem; overflow-wrap: anywhere; }
.small { font-size: .8rem; color: #5b6475; }
.cards { display: flex; gap: 1rem; overflow-x: auto; padding: .4rem 0; }
.card { flex: 1 0 24rem; max-width: 40rem; border: 1px solid #d5dae3; border-radius: 6px; padding: .6rem .8rem;
  background: #fff; }
.card h4 { margin: 0 0 .3rem; font-size: 1rem; }
.facts { background: #fafbfc; border: 1px solid #e2e5eb; border-radius: 6px; padding: .5rem .8rem; margin: .4rem 0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; padding: .4rem .5rem; border-radius: 4px;
  margin: .2rem 0 .5rem; font-size: .82rem; max-height: 22rem; overflow: auto; }
ol.exemplars { padding-left: 1.3rem; margin: .2rem 0; } ol.exemplars li { margin-bottom: .5rem; }
.badge { display: inline-block; padding: 0 .4rem; border-radius: 4px; font-size: .8rem; background: #eef0f4; }
.badge.verified { background: #dcf5e3; } .badge.mismatch, .badge.failed { background: #fde2e1; }
details > summary { cursor: pointer; color: #2456a6; }
.hidden-run { display: none; }
"""

_JS = r"""
"use strict";
const DATA = JSON.parse(document.getElementById("page-data").textContent);
const RUNS = DATA.runs;
const BY_KEY = new Map(DATA.questions.map(q => [q.key, q]));
const shown = new Set(RUNS.map(r => r.run));

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}
function fmt(v) {
  if (v === null || v === undefined || v === "") return "—";
  if (Array.isArray(v)) return v.map(fmt).join(" | ");
  return String(v);
}
function short(text, n) { text = fmt(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }
function verdictMark(v) {
  if (v === true) return el("span", {class: "right", text: "✓"});
  if (v === false) return el("span", {class: "wrong", text: "✗"});
  return el("span", {class: "unknown", text: "·"});
}

function renderHeader() {
  document.getElementById("title").textContent = DATA.title;
  document.getElementById("generated").textContent =
    `${DATA.questions.length} questions · ${RUNS.length} runs · ${DATA.generated}`;
  const notes = document.getElementById("notes");
  for (const n of DATA.notes) notes.append(el("li", {text: n}));
}

function renderTables() {
  const box = document.getElementById("tables");
  let heading = null;
  for (const t of DATA.tables) {
    if (t.setting && t.setting !== heading) { heading = t.setting; box.append(el("h3", {text: heading})); }
    else if (!t.setting && heading !== null) { heading = null; box.append(el("h3", {text: "Across settings"})); }
    if (t.title) box.append(el("p", {text: t.title, class: "table-title"}));
    if (t.note) box.append(el("p", {class: "note", text: t.note}));
    const table = el("table", {class: "report-table"});
    table.append(el("thead", {}, el("tr", {}, ...t.header.map(h => el("th", {text: h})))));
    const body = el("tbody");
    for (const row of t.rows) body.append(el("tr", {}, ...row.map(c => el("td", {text: c}))));
    table.append(body);
    box.append(table);
  }
}

function renderPlots() {
  const list = document.getElementById("plot-list");
  for (const p of DATA.plots) {
    list.append(el("figure", {}, el("img", {src: p.src, alt: p.name}), el("figcaption", {text: p.name})));
  }
  const missing = document.getElementById("not-drawn");
  for (const p of DATA.not_drawn) missing.append(el("li", {text: `${p.name} not drawn: ${p.reason}`}));
  if (!DATA.plots.length && !DATA.not_drawn.length) list.append(el("p", {class: "muted", text: "No plots."}));
}

function renderFilters() {
  const type = document.getElementById("f-type");
  for (const t of DATA.answer_types) type.append(el("option", {value: t, text: t}));
  for (const id of ["f-right", "f-wrong"]) {
    const select = document.getElementById(id);
    for (const r of RUNS) select.append(el("option", {value: r.run, text: r.name}));
  }
  const runs = document.getElementById("f-runs");
  runs.append("runs shown: ");
  RUNS.forEach((r, i) => {
    const box = el("input", {type: "checkbox", id: `f-run-${i}`, checked: "checked", "data-run": r.run});
    box.addEventListener("change", () => {
      if (box.checked) shown.add(r.run); else shown.delete(r.run);
      applyColumns();
    });
    runs.append(el("label", {}, box, " " + r.name), " ");
  });
  for (const id of ["f-type", "f-disagree", "f-right", "f-wrong", "f-text"]) {
    document.getElementById(id).addEventListener(id === "f-text" ? "input" : "change", applyFilters);
  }
}

function renderQuestions() {
  const table = document.getElementById("qtable");
  const head = el("tr", {}, el("th", {text: "#"}), el("th", {text: "question"}), el("th", {text: "type"}),
                  el("th", {text: "gold"}));
  RUNS.forEach(r => head.append(el("th", {class: "run-col", "data-run": r.run, text: r.name})));
  table.tHead.append(head);
  const body = table.tBodies[0];
  DATA.questions.forEach((q, i) => {
    const tr = el("tr", {class: "q", "data-key": q.key});
    tr.append(el("td", {text: String(i + 1)}),
              el("td", {class: "question", text: q.question || q.id, title: q.id}),
              el("td", {text: q.answer_type || "—"}),
              el("td", {class: "answer", text: short(q.gold, 80) + (q.gold_scale ? ` (${q.gold_scale})` : "")}));
    for (const r of RUNS) {
      const c = q.cells[r.run];
      const td = el("td", {class: "run-col answer", "data-run": r.run});
      if (c) {
        td.append(verdictMark(c.verdict), " ", short(c.answer, 60));
        if (c.prompt_tokens !== undefined) td.append(el("div", {class: "small", text: `${c.prompt_tokens} tokens`}));
      } else td.append(el("span", {class: "unknown", text: "not run"}));
      tr.append(td);
    }
    tr.addEventListener("click", () => toggleDetail(tr, q));
    body.append(tr);
  });
}

function exemplarList(keys) {
  const box = el("div");
  const items = keys.map(key => DATA.exemplars[key] || {id: key, shows: {}, source: "not found"});
  const sources = new Set(items.map(x => x.source));
  if (sources.size === 1) box.append(el("div", {class: "small", text: `from ${[...sources][0]}`}));
  const list = el("ol", {class: "exemplars"});
  for (const x of items) {
    const item = el("li", {class: "exemplar"}, el("div", {class: "exemplar-question",
                                                           text: x.question || `(question not available) ${x.id}`}));
    for (const [field, text] of Object.entries(x.shows || {})) {
      item.append(el("div", {class: "small", text: field}), el("pre", {text: text}));
    }
    item.append(el("div", {class: "small", text: sources.size === 1 ? x.id : `${x.id} · ${x.source}`}));
    list.append(item);
  }
  box.append(list);
  return box;
}

function promptBlock(p) {
  if (!p) return null;
  const box = el("div", {class: "prompt"});
  box.append(el("span", {class: `badge ${p.status.replace(" ", "-")}`, text: `prompt: ${p.status}`}), " ",
             el("span", {class: "small", text: p.detail || ""}));
  if (p.recorded) box.append(el("div", {class: "small", text: `sha256 of call 1: ${p.recorded}` +
                                                         (p.calls > 1 ? ` (${p.calls} LM calls)` : "")}));
  if (p.messages) {
    const details = el("details", {}, el("summary", {text: `prompt of LM call 1 (${p.messages.length} messages)`}));
    for (const m of p.messages) {
      details.append(el("div", {class: "small", text: m.role}), el("pre", {text: fmt(m.content)}));
    }
    box.append(details);
  }
  return box;
}

function runCard(run, c) {
  const card = el("div", {class: "card", "data-run": run.run});
  card.append(el("h4", {}, verdictMark(c.verdict), " " + run.name));
  const lines = [];
  if (c.em !== undefined) lines.push(`EM ${c.em}` + (c.f1 !== undefined ? ` · F1 ${Number(c.f1).toFixed(2)}` : ""));
  if (c.route) lines.push(`route: ${c.route}` + (c.routed_answer_type ? ` (${c.routed_answer_type})` : ""));
  if (c.prompt_tokens !== undefined) lines.push(`${c.prompt_tokens} prompt tokens` +
      (c.within_budget === false ? " (over the budget)" : c.within_budget ? " (within budget)" : ""));
  if (c.lm_calls !== undefined) {
    lines.push(`${c.lm_calls} LM call(s)` + (c.attempts > 1 ? `, ${c.attempts} attempts` : ""));
  }
  card.append(el("div", {}, el("strong", {text: "answer: "}), fmt(c.answer) + (c.scale ? ` (${c.scale})` : "")));
  card.append(el("div", {class: "small", text: lines.join(" · ")}));
  if (c.error) card.append(el("div", {class: "wrong", text: `error (${c.error_kind || "?"}): ${c.error}`}));
  card.append(el("div", {}, el("strong", {text: `exemplars (${c.exemplars.length})`})));
  if (c.demos_note) card.append(el("div", {class: "small", text: c.demos_note}));
  card.append(exemplarList(c.exemplars));
  if (c.output) card.append(el("div", {}, el("strong", {text: "program / reasoning"})), el("pre", {text: c.output}));
  const prompt = promptBlock(c.prompt);
  if (prompt) card.append(prompt);
  return card;
}

function toggleDetail(tr, q) {
  const next = tr.nextElementSibling;
  if (next && next.classList.contains("detail")) { next.remove(); tr.classList.remove("open"); return; }
  tr.classList.add("open");
  const cell = el("td", {colspan: String(4 + RUNS.length)});
  const facts = el("div", {class: "facts"});
  const text = q.question || "(not available: the eval split was not read)";
  facts.append(el("div", {}, el("strong", {text: "question: "}), text),
               el("div", {}, el("strong", {text: "gold: "}), fmt(q.gold) + (q.gold_scale ? ` (${q.gold_scale})` : "")));
  if (q.derivation) facts.append(el("div", {}, el("strong", {text: "gold derivation: "}), fmt(q.derivation)));
  facts.append(el("div", {class: "small", text: `${q.id} · document ${q.doc_id || "?"} · ${q.answer_type || "?"}` +
                                                (q.modality ? ` · ${q.modality}` : "")}));
  cell.append(facts);
  const cards = el("div", {class: "cards"});
  for (const r of RUNS) if (q.cells[r.run] && shown.has(r.run)) cards.append(runCard(r, q.cells[r.run]));
  cell.append(cards);
  tr.after(el("tr", {class: "detail"}, cell));
}

function matches(q) {
  const type = document.getElementById("f-type").value;
  const right = document.getElementById("f-right").value;
  const wrong = document.getElementById("f-wrong").value;
  const text = document.getElementById("f-text").value.trim().toLowerCase();
  if (type && q.answer_type !== type) return false;
  if (document.getElementById("f-disagree").checked && !q.disagree) return false;
  if (right && q.verdicts[right] !== true) return false;
  if (wrong && q.verdicts[wrong] !== false) return false;
  if (text) {
    const answers = Object.values(q.cells).map(c => fmt(c.answer));
    const hay = [q.question, q.id, fmt(q.gold), ...answers].join(" ").toLowerCase();
    if (!hay.includes(text)) return false;
  }
  return true;
}

function applyFilters() {
  let n = 0;
  for (const tr of document.querySelectorAll("#qtable tr.q")) {
    const ok = matches(BY_KEY.get(tr.dataset.key));
    tr.style.display = ok ? "" : "none";
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("detail")) next.style.display = ok ? "" : "none";
    if (ok) n += 1;
  }
  document.getElementById("count").textContent = `showing ${n} of ${DATA.questions.length} questions`;
}

function applyColumns() {
  for (const node of document.querySelectorAll("#qtable [data-run]")) {
    node.classList.toggle("hidden-run", !shown.has(node.dataset.run));
  }
}

renderHeader();
renderTables();
renderPlots();
renderFilters();
renderQuestions();
applyFilters();
"""
