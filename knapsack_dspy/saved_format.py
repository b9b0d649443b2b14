"""Every saved format's version, with its history, and the layout migrations of saved programs.

What the package writes and reads again carries a version number; each is defined here, once, and the module that
writes the format imports it. Bump a number when what is written changes shape, add its line to the history,
and give the reader a migration from the previous version (older files keep loading):

- **saved programs** (``kdspy compile``, ``save_program``): the pipeline spec (``PIPELINE_SPEC_VERSION``), each
  ``SelectExemplars`` state (``SELECT_EXEMPLARS_STATE_VERSION``) and the answer-type router's state
  (``ROUTER_STATE_VERSION``). Their migrations: ``pipeline_spec_arguments`` and ``select_module_moved`` below
  (the program's layout); a version-1 ``SelectExemplars`` state's settings become a ``SelectionConfig`` in
  ``modules/select_exemplars_state.config_of_version_1`` (it needs the selection package, above this floor).
- **results rows** (``predictions.jsonl``): ``RESULT_ROW_SCHEMA_VERSION``; rows of older versions are migrated on
  read by ``bench/results/row_schema.MIGRATIONS`` (they need the row outcomes the bench declares).
- **prompt fingerprints** in rows (``PROMPT_FORMAT_VERSION``): not migrated -- a prompt re-rendered by another
  format cannot be checked against the row's fingerprint, and ``bench/results/prompt_rendering`` says so.
- **the results page's data** (``PAGE_DATA_VERSION``): written whole each time, never read back.

Nothing here imports the package (floor 0): the numbers and the dictionary-only migrations.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The pipeline spec saved with a program (its constructor arguments, ``PipelineSpec``).
#: 1: the selection settings repeated in the spec (``selector``, ``max_exemplars``, ``attributes``);
#: 2: the selection a module of its own (``"select"``) beside the solver's predictor;
#: 3: the selection in the demo predictor's state (``SelectingPredict``, under ``"selection"``).
PIPELINE_SPEC_VERSION = 3
PIPELINE_SPEC_VERSIONS = (1, 2, 3)  # what loads

#: ``SelectExemplars``' saved state.
#: 1: settings in ``params`` (before ``SelectionConfig``); 2: a ``SelectionConfig`` (``config``);
#: 3: the texts to embed come from the demos; signature fields and a value function's name;
#: 4: the predictor's input fields (a query never selects a pool demo with its own inputs);
#: 5: a pool of more than ``selection.pool_store.INLINE_POOL_LIMIT`` exemplars is a pool store (``"pool_store"``:
#: its content hash) in place of ``"pool"`` (smaller pools stay inline, as in 4).
SELECT_EXEMPLARS_STATE_VERSION = 5
SELECT_EXEMPLARS_STATE_VERSIONS = (1, 2, 3, 4, 5)  # what loads

#: The answer-type router's saved state. 1: threshold, cue override, classifier.
ROUTER_STATE_VERSION = 1

#: The results rows this code writes. 1: rows without ``schema_version`` (written before the row schema; the
#: later ones may hold ``exemplar_tokens`` and ``token_count``); 2: ``schema_version``, ``completions``;
#: ``error_kind`` in every row with an error; 3: one ``attribute_match`` field (attribute -> share) in place of one
#: field per attribute (``attribute_match.modality``, ``attribute_match.answer_type``).
RESULT_ROW_SCHEMA_VERSION = 3

#: What a recorded prompt fingerprint was rendered by (bumped whenever rendering changes what a prompt holds for
#: the same program and example: table layout, demo rendering, instructions, adapter).
#: 1: rows before fingerprints; 2: table layout, shared tables, literal programs, routing.
PROMPT_FORMAT_VERSION = 2

#: The results page's data (``bench/reporting/page_data.build_page_data``). 1: the first.
PAGE_DATA_VERSION = 1

# Selection settings version-1 specs repeated (the SelectExemplars state holds them): dropped when loading.
_VERSION_1_SELECTION_KEYS = ("selector", "max_exemplars", "attributes")


def pipeline_spec_arguments(state) -> dict:
    """The constructor arguments a saved pipeline spec holds (a version-1 spec's selection settings dropped: the
    selection state has them)."""
    if not isinstance(state, dict) or state.get("version") not in PIPELINE_SPEC_VERSIONS:
        raise ValueError(f"unsupported pipeline spec: {state!r}")
    dropped = _VERSION_1_SELECTION_KEYS if state["version"] == 1 else ()
    return {k: v for k, v in state.items() if k != "version" and k not in dropped}


def select_module_moved(state: Mapping, spec_version, demo_predictor_name: str) -> dict:
    """A saved program's state in today's layout: before spec version 3 the selection was a module of its own
    (``"select"``); now the demo predictor (``demo_predictor_name``) holds it under ``"selection"``."""
    state = dict(state)
    if spec_version not in (1, 2):
        return state
    selection = state.pop("select", None)
    if not isinstance(selection, dict):
        raise ValueError("a version-2 program without its 'select' state")
    state[demo_predictor_name] = {**state[demo_predictor_name], "selection": selection}
    return state
