"""The package's errors and warnings: one base class each, so a caller can catch everything knapsack-dspy raises on
purpose with one ``except`` (as httpx's ``HTTPError``), and the CLI prints any of them as one line.

Every class keeps its old built-in base too (``ValueError``, ``RuntimeError``, ...), so code that caught those
still does. The tree (``docs/errors.md``)::

    KnapsackDspyError
    ├── ConfigError                      the data and cache directories (paths)
    ├── DataError                        a data set's file or record (``QueryInputError``: a query's inputs)
    ├── UnknownTaskError                 a data set no task is registered for (docqa.tasks)
    ├── FileLimitError, DuplicateKeyError   a file we were given is too large or malformed (file_limits)
    ├── StatuteParseError                a statute text that does not parse
    ├── ProgramError                     a FinQA DSL program that does not parse
    ├── LLMError                         the LM layer: LLMConfigError > LocalModelError > LocalWeightsError,
    │                                    ModelServerError; ModelServerUnavailable (transient)
    ├── GGUFError, NotRecordedError, EmbedderError   a GGUF file; a replay's unrecorded prompt; the embedder
    ├── SelectionConfigError, PoolStoreError, NotFittedError, SelectorContractError   the selection engine
    ├── CompileError, PoolError, NotCompiledError, PiecesError   the teleprompter and selecting predictors
    ├── ScoringInputError                a metric's input (FinQAScoreError)
    ├── SuiteError, ResultsFileError, ResultsBusyError, ProvenanceMismatchError, ResultsReadError,
    │   QuestionRangeError, ArmError, ResultsPageError, RescoreError, RayWorkerError,
    │   MlflowUnavailableError           the bench
    └── UserError                        a command line that cannot be carried out

    KnapsackDspyWarning (a UserWarning)
    ├── ZeroShotWarning, CaseCoverageFallback, FaissMissingWarning, DataWarning, PluginWarning

Outside the tree on purpose: control flow inside a module (``_NotEquivalent``, ``_Rendered``, ...), a program's
own failure in the sandbox (``ProgramFailure``, ``TableLookupError``: reported in the result, never raised to a
caller) and ``RowSchemaError`` (a results row the code itself built wrong: a bug, with its traceback).
"""

from __future__ import annotations

__all__ = ["KnapsackDspyError", "KnapsackDspyWarning"]


class KnapsackDspyError(Exception):
    """Base of every error knapsack-dspy raises for a caller to act on; its message is the whole story (one
    line: the CLI prints it and exits 2)."""


class KnapsackDspyWarning(UserWarning):
    """Base of knapsack-dspy's warnings (``warnings.filterwarnings("ignore", category=KnapsackDspyWarning)``
    silences them all)."""
