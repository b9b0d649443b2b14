"""``PipelineSpec``: a program's constructor arguments, saved with its state so ``load_program`` can rebuild it."""

from __future__ import annotations

from dspy.predict.parameter import Parameter

from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.saved_format import PIPELINE_SPEC_VERSION, pipeline_spec_arguments

__all__ = ["PipelineSpec"]


class PipelineSpec(Parameter):
    """The constructor arguments of a pipeline, saved with its state (JSON) so it can be rebuilt."""

    def __init__(self, **spec):
        self.spec = dict(spec)

    def dump_state(self, json_mode=True):
        return {"version": PIPELINE_SPEC_VERSION, **self.spec}

    def load_state(self, state):
        self.spec = pipeline_spec_arguments(state)
        return self

    def reset(self):
        pass


def compiled_token_counter(program):
    """A program's token counter: the one it was given, else the model's it was compiled for (else its own model's);
    ``program`` has ``_token_counter``, ``_selecting()`` and ``model``."""
    if program._token_counter is None:
        compiled = program._selecting()
        program._token_counter = get_token_counter((compiled.selection.token_model if compiled else None)
                                                   or program.model)
    return program._token_counter
