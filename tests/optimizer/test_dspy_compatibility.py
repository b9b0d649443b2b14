"""The DSPy release range pyproject.toml declares, and the DSPy internals the package wraps."""

import ast
import inspect
import sys
from importlib.metadata import version
from pathlib import Path

import dspy
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _declared(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(r for r in map(Requirement, project["dependencies"]) if r.name == name)


def test_the_installed_dspy_is_in_the_declared_range():
    requirement = _declared("dspy")
    assert requirement.specifier, "pyproject.toml must bound dspy"
    assert requirement.specifier.contains(version("dspy")), (version("dspy"), str(requirement.specifier))
    assert not requirement.specifier.contains("3.5.0")  # 3.5 changes what we wrap (see pyproject.toml)


def test_the_cache_methods_we_wrap_have_the_signature_we_call():
    """llm/cache.key_cache_on_endpoint wraps dspy.cache.cache_key(request, ignored_args_for_cache_key) and
    llm/call_counter.install_cache_hit_counter wraps dspy.cache.get(request, ...); an LM request names its
    DSPy function in "_fn_identifier", which the hit counter reads: tests/optimizer/test_llm_lm_factory.py runs both
    through a stub server (test_cached_rerun_makes_zero_requests, test_requests_without_a_server_keep_...)."""
    from dspy.clients.cache import Cache

    for method in (Cache.cache_key, Cache.get):
        assert list(inspect.signature(method).parameters)[:3] == ["self", "request", "ignored_args_for_cache_key"]
    assert isinstance(dspy.cache, Cache)


def test_the_package_uses_no_dspy_program_of_thought():
    """DSPy 3.5 removes dspy.ProgramOfThought; programs are run by knapsack_dspy.docqa.sandbox instead."""
    for path in (ROOT / "knapsack_dspy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            assert not (isinstance(node, ast.Attribute) and node.attr == "ProgramOfThought"), path
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dspy"):
                assert "ProgramOfThought" not in [a.name for a in node.names], path
