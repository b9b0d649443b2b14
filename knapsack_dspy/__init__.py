"""knapsack-dspy: compiled prompting for QA over semi-structured documents.

Few-shot exemplars are chosen by a knapsack integer linear program (``scipy.optimize.milp``):
maximise similarity to the query under a token budget, a maximum number of exemplars and
attribute (diversity) constraints. ``KnapsackFewShot`` compiles that into any DSPy program::

    from knapsack_dspy import KnapsackFewShot, SelectionConfig
    program = KnapsackFewShot(max_exemplars=4, budget=2048).compile(dspy.ChainOfThought("question -> answer"),
                                                                    trainset=trainset)

The public names below load on first use (PEP 562): importing the package changes nothing in ``os.environ``
and only arranges for the ``local`` LiteLLM provider (the embedded models) to be registered when LiteLLM is
imported (``llm.provider_hook``; LiteLLM then reads its bundled model map: ``_env``); it imports neither DSPy
nor LiteLLM (~3 ms). Runtime defaults (OpenMP waits, tokenizer threads) are set where those runtimes load.
"""

import importlib

from knapsack_dspy.llm.provider_hook import register_local_provider_when_litellm_loads

__version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC = {
    "KnapsackFewShot": "knapsack_dspy.teleprompt.knapsack_few_shot",
    "CompileError": "knapsack_dspy.teleprompt.knapsack_few_shot",
    "ZeroShotWarning": "knapsack_dspy.teleprompt.knapsack_few_shot",
    "SelectExemplars": "knapsack_dspy.modules.select_exemplars",
    "SelectingPredict": "knapsack_dspy.modules.selecting_predict",
    "load_compiled": "knapsack_dspy.modules.compiled_programs",
    "save_pool_stores": "knapsack_dspy.modules.compiled_programs",
    "selection_hints": "knapsack_dspy.modules.selection_context",
    "selection_log": "knapsack_dspy.modules.selection_context",
    "Pieces": "knapsack_dspy.modules.selectable_context",
    "build_pipeline": "knapsack_dspy.docqa.tasks",
    "load_program": "knapsack_dspy.docqa.pipelines.pipeline",
    "save_program": "knapsack_dspy.docqa.pipelines.pipeline",
    "SelectionConfig": "knapsack_dspy.selection.config",
    "PoolStoreError": "knapsack_dspy.selection.pool_store",
    "solve_knapsack": "knapsack_dspy.selection.knapsack",
    "AttributeConstraint": "knapsack_dspy.selection.knapsack",
    "declare_attribute": "knapsack_dspy.selection.attribute_domains",
    "register_selector": "knapsack_dspy.selection.selectors.registry",
    "ExemplarSelector": "knapsack_dspy.selection.selectors.base",
    "check_selector": "knapsack_dspy.selection.selector_checks",
    "load_examples": "knapsack_dspy.docqa.data",
    "make_lm": "knapsack_dspy.llm.lm_factory",
    "KnapsackDspyError": "knapsack_dspy.errors",
    "KnapsackDspyWarning": "knapsack_dspy.errors",
}

__all__ = sorted(_PUBLIC)

register_local_provider_when_litellm_loads()


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'knapsack_dspy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})
