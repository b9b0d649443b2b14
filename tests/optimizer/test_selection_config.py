"""SelectionConfig: one set of defaults, validated once, varied with replace, saved as JSON."""

import dataclasses
import json

import pytest

from knapsack_dspy.selection import SelectionConfig, SelectionConfigError
from knapsack_dspy.selection.selectors.fixed_set import FixedSetSelector
from knapsack_dspy.selection.selectors.seer import KnapsackSelector


def test_defaults():
    config = SelectionConfig()
    assert config.selector == "priced_case_coverage"  # the measured default (docs/core.md, "Which selector")
    assert (config.max_exemplars, config.budget, config.val_size) == (4, None, 40)
    assert (config.alpha, config.beta, config.attributes, config.knn_k) == (0.75, 0.0, (), 200)  # names none
    assert config.resolved_attribute_source == "none"  # no attribute to predict


@pytest.mark.parametrize("settings, named", [
    ({"selector": "sear"}, "unknown selector 'sear'"),
    ({"selector": 3}, "selector must be a name"),
    ({"max_exemplars": -1}, "max_exemplars"),
    ({"max_exemplars": 2.0}, "max_exemplars"),
    ({"max_exemplars": True}, "max_exemplars"),
    ({"budget": 0}, "budget"),
    ({"budget": 2048.5}, "budget"),
    ({"reserve_output_tokens": -5}, "reserve_output_tokens"),
    ({"alpha": 1.5}, "alpha"),
    ({"beta": float("nan")}, "beta"),
    ({"attributes": "modality"}, "attributes must be a list"),
    ({"attributes": ("modality", "modality")}, "twice"),
    ({"attribute_source": "oracle"}, "attribute_source"),
    ({"knn_k": 0}, "knn_k"),
    ({"max_per_doc": 0}, "max_per_doc"),
    ({"core_size": -1}, "core_size"),
    ({"val_size": 1.5}, "val_size"),
    ({"seed": -1}, "seed"),
    ({"embed_fields": ()}, "embed_fields"),
    ({"exclude_same_doc": "yes"}, "exclude_same_doc"),
    ({"selector_params": [("x", 1)]}, "selector_params must be a mapping"),
])
def test_each_bad_setting_is_named(settings, named):
    with pytest.raises(SelectionConfigError, match=named):
        SelectionConfig(**settings)


def test_selector_params_are_checked_against_what_the_selector_declares():
    config = SelectionConfig(selector="fixed", selector_params={"n_candidates": 3, "respect_budget": False})
    selector = config.build_selector()
    assert isinstance(selector, FixedSetSelector)
    assert (selector.n_candidates, selector.respect_budget, selector.max_exemplars) == (3, False, 4)
    with pytest.raises(SelectionConfigError, match=r"selector 'fixed' has no parameter 'n_candidate'.*n_candidates"):
        SelectionConfig(selector="fixed", selector_params={"n_candidate": 3})
    with pytest.raises(SelectionConfigError, match=r"'n_candidates'"):  # kate has no such parameter
        SelectionConfig(selector="kate", selector_params={"n_candidates": 3})
    with pytest.raises(SelectionConfigError, match=r"\['alpha'\] are SelectionConfig settings"):
        SelectionConfig(selector_params={"alpha": 0.5})


def test_the_selector_validates_its_own_parameters_too():
    with pytest.raises(SelectionConfigError, match="selector 'hybrid': core_size"):
        SelectionConfig(selector="hybrid", max_exemplars=1, core_size=2)
    assert SelectionConfig(selector="hybrid", max_exemplars=2, core_size=2).build_selector().core_size == 2


def test_common_settings_reach_only_selectors_that_take_them():
    config = SelectionConfig(selector="seer", alpha=0.5, beta=0.25, knn_k=50, max_per_doc=2,
                             attributes=("modality", "answer_type"))
    seer = config.build_selector()
    assert isinstance(seer, KnapsackSelector)
    assert (seer.alpha, seer.beta, seer.knn_k, seer.max_per_doc, seer.attributes) == (
        0.5, 0.25, 50, 2, ("modality", "answer_type"))
    kate = dataclasses.replace(config, selector="kate").build_selector()
    assert kate.get_params() == {"max_exemplars": 4, "respect_budget": False}


def test_replace_and_with_settings_validate_again():
    config = SelectionConfig()
    assert dataclasses.replace(config, max_exemplars=2).max_exemplars == 2
    with pytest.raises(SelectionConfigError, match="alpha"):
        dataclasses.replace(config, alpha=-1)
    assert config.with_settings() is config
    assert config.with_settings(selector="kate").selector == "kate"
    with pytest.raises(SelectionConfigError, match=r"unknown selection setting 'max_exemplar'; valid: selector"):
        config.with_settings(max_exemplar=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_exemplars = 3


@pytest.mark.parametrize("settings, source", [
    ({}, "none"),
    ({"attributes": ("modality",)}, "classifier"),
    ({"selector": "seer_gold", "attributes": ("modality",)}, "gold"),
    ({"selector": "seer_gold", "attribute_source": "classifier"}, "classifier"),
    ({"attribute_source": "lm"}, "lm"),
    ({"attributes": ()}, "none"),
    ({"attributes": (), "attribute_source": "gold"}, "gold"),
])
def test_attribute_source_defaults_to_the_selectors(settings, source):
    assert SelectionConfig(**settings).resolved_attribute_source == source


def test_json_round_trip():
    config = SelectionConfig(selector="fixed", max_exemplars=3, budget=1500, attributes=("modality", "answer_type"),
                             attribute_source="gold", max_per_doc=1, seed=7, embed_fields=("question", "table"),
                             selector_params={"n_candidates": 9})
    data = json.loads(json.dumps(config.to_dict()))
    assert SelectionConfig.from_dict(data) == config
    assert SelectionConfig.from_dict({}) == SelectionConfig()
    with pytest.raises(SelectionConfigError, match="unknown selection setting 'selectr'"):
        SelectionConfig.from_dict({**data, "selectr": "kate"})
    with pytest.raises(SelectionConfigError, match="JSON object"):
        SelectionConfig.from_dict(["seer"])


def test_lists_become_tuples_and_params_are_copied():
    params = {"n_candidates": 2}
    config = SelectionConfig(selector="fixed", attributes=["modality"], selector_params=params)
    params["n_candidates"] = 5
    assert config.attributes == ("modality",) and config.selector_params == {"n_candidates": 2}
