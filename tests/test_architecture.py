"""The package's shape: no import cycles, no upward imports across the layers of DEVELOPERS.md, a selection
package without DSPy, no selector names tested outside the registry, own imports at the top of modules."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "knapsack_dspy"

# DEVELOPERS.md, "Layers": a module may import its own package and the packages on lower floors only (two
# packages on one floor do not import each other).
LAYERS = {
    # the optimizer wing: the selection engine, the DSPy modules that select, the teleprompter
    "knapsack_dspy": 0, "knapsack_dspy._env": 0, "knapsack_dspy.paths": 0, "knapsack_dspy.memo": 0,
    "knapsack_dspy.file_limits": 0, "knapsack_dspy.messages": 0,
    "knapsack_dspy._commit": 0, "knapsack_dspy.disk_memo": 0,
    "knapsack_dspy.saved_format": 0, "knapsack_dspy.text_holes": 0, "knapsack_dspy.errors": 0,
    "knapsack_dspy.plugins": 0,
    "knapsack_dspy.selection": 1, "knapsack_dspy.llm": 1, "knapsack_dspy.embeddings": 1,
    "knapsack_dspy.modules": 2,
    "knapsack_dspy.teleprompt": 3,
    # the document-QA application wing
    "knapsack_dspy.docqa": 4, "knapsack_dspy.docqa.number_text": 4, "knapsack_dspy.docqa.table_layout": 4,
    "knapsack_dspy.docqa.task_discovery": 4,
    "knapsack_dspy.docqa.retrieval": 5,
    "knapsack_dspy.docqa.sandbox": 6,
    "knapsack_dspy.docqa.data": 7,
    "knapsack_dspy.docqa.metrics": 8,
    "knapsack_dspy.docqa.signatures": 9,
    "knapsack_dspy.docqa.solvers": 10,
    "knapsack_dspy.docqa.pipelines": 11,
    "knapsack_dspy.docqa.tasks": 12,
    # the harness wing
    "knapsack_dspy.bench": 13,
    "knapsack_dspy.serve": 13,
    "knapsack_dspy.cli": 14,
    # stand-ins for the tests and the measurement scripts: nothing in the product imports them
    "knapsack_dspy.testing": 15,
}
#: the floors of a wing's loose modules (small shared helpers), which may import one another
ROOT_FLOORS = (0, 4)
#: DEVELOPERS.md, "Three wings": the optimizer < the document-QA application < the harness (bench, serve, cli);
#: a wing imports its own and the wings before it only.
WINGS = ("optimizer", "application", "harness")


def wing_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "docqa":
        return "application"
    if len(parts) > 1 and parts[1] in ("bench", "serve", "cli", "testing"):
        return "harness"
    return "optimizer"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path):
    """(imported package module, line, at module level?) for every import of the package's own modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "knapsack_dspy":
                yield target, node.lineno, id(node) in top_level


def _graph() -> dict[str, set[str]]:
    return {name: {t for t, _, _ in _imports(name, path) if t in MODULES and t != name}
            for name, path in MODULES.items()}


def _layer_package(module: str) -> str:
    parts = module.split(".")
    depth = 3 if len(parts) > 2 and parts[1] == "docqa" else 2
    return ".".join(parts[:depth]) if len(parts) > 1 else module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer():
    assert {_layer_package(m) for m in MODULES} <= set(LAYERS)


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The package root (knapsack_dspy/__init__.py) is the public facade: it may reach any floor (its public names load
# lazily); every other module imports ``knapsack_dspy.<module>``, never the root.
FACADE = "knapsack_dspy"
# Imports of own modules deferred on purpose, with the reason.
DEFERRED_IMPORTS = {
    # registers the LiteLLM provider when LiteLLM loads; the provider module imports LiteLLM, this one must not
    "knapsack_dspy.llm.provider_hook": {"knapsack_dspy.llm.local_provider"},
    # What a DSPy user's import of the optimizer does not need (test_the_optimizer_imports_alone: at most 40 of our
    # modules), loaded where it is first used: a large pool's store, the classifier / LM attribute sources, latency
    # budgets, saving and loading, an empty selection's diagnosis, a fixed set, a compile's model check and cost,
    # an error's wording, a model's tokenizer and context window, a provider's prompt cache, a call with evidence
    # pieces (selectable context).
    "knapsack_dspy.llm.errors": {"knapsack_dspy.llm.empty_reply"},
    "knapsack_dspy.llm.token_counter": {"knapsack_dspy.llm.litellm_provider", "knapsack_dspy.llm.local_models",
                                        "knapsack_dspy.llm.served_models"},
    "knapsack_dspy.modules.compiled_programs": {"knapsack_dspy.file_limits", "knapsack_dspy.selection.pool_store"},
    "knapsack_dspy.modules.pool_columns": {"knapsack_dspy.selection.pool_store",
                                           "knapsack_dspy.modules.selectable_context"},
    "knapsack_dspy.modules.select_exemplars_state": {"knapsack_dspy.selection.pool_store"},
    "knapsack_dspy.modules.select_exemplars": {
        "knapsack_dspy.selection.pool_store", "knapsack_dspy.selection.attribute_classifier",
        "knapsack_dspy.modules.lm_attribute_predictor", "knapsack_dspy.selection.latency",
        "knapsack_dspy.llm.latency_rates", "knapsack_dspy.selection.selectors.fixed_set",
        "knapsack_dspy.modules.empty_selection", "knapsack_dspy.saved_format",
        "knapsack_dspy.modules.select_exemplars_state", "knapsack_dspy.modules.evidence_selection",
        "knapsack_dspy.modules.selectable_context"},
    "knapsack_dspy.modules.selecting_predict": {"knapsack_dspy.llm.prompt_cache",
                                                "knapsack_dspy.modules.selectable_context"},
    "knapsack_dspy.selection.config": {"knapsack_dspy.selection.latency"},
    # installed plug-ins are read when a selector name is not found or the names are listed
    "knapsack_dspy.selection.selectors.registry": {"knapsack_dspy.plugins"},
    "knapsack_dspy.selection.selectors.base": {"knapsack_dspy.selection.demo_knapsack"},
    "knapsack_dspy.teleprompt.knapsack_few_shot": {
        "knapsack_dspy.messages", "knapsack_dspy.llm.call_counter", "knapsack_dspy.llm.model_check"},
    "knapsack_dspy.teleprompt.settings_search": {"knapsack_dspy.teleprompt.selection_proxies"},
    "knapsack_dspy.teleprompt.compile_report": {"knapsack_dspy.modules.selectable_context"},
    "knapsack_dspy.teleprompt.pool_measurement": {"knapsack_dspy.modules.selectable_context"},
}


def test_no_import_goes_up_or_sideways_across_layers():
    wrong = []
    for name, path in MODULES.items():
        if name == FACADE:
            continue
        own = _layer_package(name)
        for target, line, _ in _imports(name, path):
            other = _layer_package(target)
            if other != own and LAYERS[other] >= LAYERS[own] and not LAYERS[own] == LAYERS[other] in ROOT_FLOORS:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} ({own} is on floor {LAYERS[own]}, "
                             f"{other} on {LAYERS[other]})")
    assert wrong == []


def _wing_violations(imports) -> list[str]:
    """``imports``: (importing module, imported module, where) triples; the ones that go back across the wings."""
    order = {w: i for i, w in enumerate(WINGS)}
    return [f"{where}: {src} ({wing_of(src)}) imports {dst} ({wing_of(dst)})" for src, dst, where in imports
            if order[wing_of(dst)] > order[wing_of(src)]]


def test_no_import_goes_back_across_the_wings():
    """The optimizer imports nothing of the application or the harness; the application nothing of the harness."""
    imports = [(name, target, f"{path.relative_to(ROOT)}:{line}") for name, path in MODULES.items() if name != FACADE
               for target, line, _ in _imports(name, path)]
    assert _wing_violations(imports) == []


def test_the_wing_check_finds_an_import_from_the_optimizer_into_the_application():
    found = _wing_violations([("knapsack_dspy.selection.knapsack", "knapsack_dspy.docqa.data.loader", "x.py:1"),
                              ("knapsack_dspy.docqa.data.loader", "knapsack_dspy.selection.knapsack", "y.py:1"),
                              ("knapsack_dspy.docqa.metrics.finqa", "knapsack_dspy.bench.results.store", "z.py:1")])
    assert [f.split(":")[0] for f in found] == ["x.py", "z.py"]


def test_the_optimizer_imports_alone():
    """A DSPy user's imports of the optimizer load no module of the application or the harness, and few of ours."""
    code = ("import sys; import knapsack_dspy; "
            "from knapsack_dspy import KnapsackFewShot, SelectExemplars, SelectingPredict, SelectionConfig, "
            "solve_knapsack, check_selector, declare_attribute, load_compiled; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'knapsack_dspy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded = out.stdout.split()
    assert [m for m in loaded if wing_of(m) != "optimizer"] == []
    # at most 47 (47 today: compiling a predictor is measure / sample / search / report, a module each, with the
    # pool's specification, the compile target and the teleprompter's errors): built-in selectors, local-model token
    # counting, pool stores, attribute classifiers, the LM attribute predictor, latency rates, saved-state reading,
    # model checks and selectable context load when first used
    assert len(loaded) <= 47, loaded


#: names of the application's data sets and attributes: the optimizer's code (outside its docstrings and comments,
#: which may cite measurements) writes none of them
DOMAIN_NAMES = re.compile(r"\b(tatqa|tat-qa|finqa|finqa_cases|sara|gsm8k|modality|answer_type|program_template|"
                          r"derivation)\b", re.IGNORECASE)


def _docstring_ids(tree) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_the_optimizer_names_no_data_set_and_no_attribute():
    found = []
    for name, path in MODULES.items():
        if wing_of(name) != "optimizer" or name == FACADE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstring_ids(tree)
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.value[:60]!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and DOMAIN_NAMES.search(node.value)]
    assert found == []


def test_own_modules_are_imported_at_the_top_outside_the_cli():
    """Imports inside functions hide the dependency graph; only cli/ defers them (a fast ``kdspy --help``)."""
    inside = [f"{path.relative_to(ROOT)}:{line} imports {target}"
              for name, path in MODULES.items() if not name.startswith("knapsack_dspy.cli")
              for target, line, at_top in _imports(name, path)
              if not at_top and target not in DEFERRED_IMPORTS.get(name, ())]
    assert inside == []


def test_nothing_below_the_cli_imports_the_facade():
    wrong = [f"{path.relative_to(ROOT)}:{line}" for name, path in MODULES.items()
             if name != FACADE and not name.startswith("knapsack_dspy.cli")
             for target, line, _ in _imports(name, path) if target == FACADE]
    assert wrong == []


def test_importing_the_package_is_cheap():
    """``import knapsack_dspy`` imports neither DSPy nor LiteLLM (nor torch): the local provider registers when
    LiteLLM loads (llm/provider_hook.py)."""
    code = "import sys, knapsack_dspy; print(sorted(m for m in ('dspy', 'litellm', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_selection_package_imports_no_dspy():
    selection = [p for n, p in MODULES.items() if n.startswith("knapsack_dspy.selection")]
    for path in selection:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in ("dspy", "litellm") for n in names), (path, node.lineno)
    code = ("import sys, knapsack_dspy.selection, knapsack_dspy.selection.config; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dspy', 'litellm', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _selector_and_mode_names() -> set[str]:
    from knapsack_dspy.selection.selectors import MODES, SELECTORS

    return set(SELECTORS) | set(MODES)


def _string_constants(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_string_constants(e) for e in node.elts)) if node.elts else set()
    return set()


@pytest.mark.parametrize("package", ["teleprompt", "modules", "bench", "cli", "docqa", "llm"])
def test_no_selector_name_is_tested_outside_the_selection_package(package):
    names = _selector_and_mode_names()
    found = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                compared = set().union(*(_string_constants(c) for c in [node.left, *node.comparators]))
                if compared & names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(compared & names)}")
    assert found == []


def _task_pipeline_and_route_names() -> set[str]:
    """Every registered task's name, its pipelines' and the routes'."""
    from knapsack_dspy.docqa.pipelines.pipeline_names import COMPUTE_ROUTE, EXTRACT_ROUTE, ROUTINGS
    from knapsack_dspy.docqa.tasks import TASKS

    return ({*TASKS, *(p for task in TASKS.values() for p in task.pipelines), EXTRACT_ROUTE, COMPUTE_ROUTE,
             *(r for r in ROUTINGS if r)})


def _name_dispatch(tree, names: set[str]) -> list[tuple[int, list[str]]]:
    """(line, names) of each comparison, ``match`` case or dict key that tests one of ``names``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            tested = set().union(*(_string_constants(c) for c in [node.left, *node.comparators]))
        elif isinstance(node, ast.MatchValue):
            tested = _string_constants(node.value)
        elif isinstance(node, ast.Dict):
            tested = set().union(set(), *(_string_constants(k) for k in node.keys if k is not None))
        else:
            continue
        if tested & names:
            found.append((node.lineno, sorted(tested & names)))
    return found


@pytest.mark.parametrize("package", ["bench", "cli", "serve"])
def test_the_harness_dispatches_on_no_task_pipeline_or_route_name(package):
    """What differs between data sets, pipelines or routes is the task's to say (``Task``) or the application's
    (``docqa``): the harness compares no such name (a default value, as ``--dataset tatqa``, is no comparison)."""
    names = _task_pipeline_and_route_names()
    found = [f"{path.relative_to(ROOT)}:{line}: {hit}" for path in sorted((PACKAGE / package).rglob("*.py"))
             for line, hit in _name_dispatch(ast.parse(path.read_text(encoding="utf-8")), names)]
    assert found == []


def test_the_name_dispatch_check_finds_a_comparison_a_case_and_a_table():
    code = ('if run.dataset == "sara": pass\nif p not in ("pot", "finqa_pot"): pass\n'
            'match route:\n    case "extract": pass\nTABLE = {"compute": 1}\nok = {"dataset": "tatqa"}\n'
            'fine = name == "other"\n')
    assert sorted(line for line, _ in _name_dispatch(ast.parse(code), _task_pipeline_and_route_names())) == [1, 2, 4, 5]


def test_the_public_names_load_lazily_from_the_top():
    code = ("import sys, knapsack_dspy as k\n"
            "before = sorted(m for m in ('dspy', 'litellm') if m in sys.modules)\n"
            "from knapsack_dspy import (KnapsackFewShot, SelectExemplars, SelectionConfig, solve_knapsack,\n"
            "                           AttributeConstraint, load_examples, make_lm)\n"
            "from knapsack_dspy.teleprompt import KnapsackFewShot as K\n"
            "print(before, KnapsackFewShot is K, all(getattr(k, n) is not None for n in k.__all__),\n"
            "      set(k.__all__) <= set(dir(k)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[] True True True"


# DEVELOPERS.md, "Layers", bench: its subpackages in floors of their own, the same rule inside the package.
BENCH_LAYERS = {"results": 0, "suites": 0, "scoring": 1, "programs": 2, "reporting": 3, "execution": 4}


def _bench_group(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "bench" else None


def test_every_bench_module_is_in_a_layered_subpackage():
    loose = sorted(m for m in MODULES if m.startswith("knapsack_dspy.bench.") and _bench_group(m) is None
                   and m.rsplit(".", 1)[-1] not in BENCH_LAYERS)
    assert loose == []
    assert {_bench_group(m) for m in MODULES if _bench_group(m)} == set(BENCH_LAYERS)


def test_no_bench_import_goes_up_or_sideways():
    wrong = []
    for name, path in MODULES.items():
        own = _bench_group(name)
        if own is None:
            continue
        for target, line, _ in _imports(name, path):
            other = _bench_group(target)
            if other and other != own and BENCH_LAYERS[other] >= BENCH_LAYERS[own]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} (bench.{own} is on floor "
                             f"{BENCH_LAYERS[own]}, bench.{other} on {BENCH_LAYERS[other]})")
    assert wrong == []
