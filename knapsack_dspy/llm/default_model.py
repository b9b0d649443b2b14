"""The model the package asks when none is named: the embedded Qwen2.5-Coder 1.5B (``local_models``).

Named once, here, in a module that imports nothing, so that a command line can offer it as its default without
loading the LLM layer (``kdspy --help``, ``kdspy score``).
"""

DEFAULT_LOCAL_MODEL = "local/qwen2.5-coder-1.5b-instruct"
