"""knapsack-dspy: compiled prompting for QA over semi-structured documents.

Few-shot exemplars are chosen by a knapsack integer linear program (``scipy.optimize.milp``):
maximise similarity to the query under a token budget, a maximum number of exemplars and
attribute (diversity) constraints.

Importing the package sets environment defaults (``_env``) and arranges for the ``local`` LiteLLM provider
(the embedded models) to be registered when LiteLLM is imported (``llm.provider_hook``); it imports neither
DSPy nor LiteLLM.
"""

from knapsack_dspy import _env  # noqa: F401  (must run before dspy / litellm are imported)
from knapsack_dspy.llm.provider_hook import register_local_provider_when_litellm_loads

__version__ = "0.1.0"

register_local_provider_when_litellm_loads()
