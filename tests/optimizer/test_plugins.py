"""Plug-ins from installed packages (``knapsack_dspy/plugins.py``): a selector another distribution declares under
the entry-point group ``knapsack_dspy.selectors`` is registered the first time a name is missed or the names are
listed; one that cannot be is left out with one warning line naming its entry point, and nothing else breaks.
(The whole path, an installed package's task and selector run by ``kdspy bench``:
tests/harness/test_outside_package.py.)
"""

import importlib.metadata
import re
import sys
import types
from pathlib import Path

import pytest

from knapsack_dspy.plugins import SELECTORS_GROUP, PluginWarning, describe_entry_point, load_plugins
from knapsack_dspy.selection.selectors import SELECTORS, ExemplarSelector, registry, selector_class
from knapsack_dspy.selection.selectors.base import candidates, greedy_fill, make_selection
from knapsack_dspy.selection.selectors.registry import BUILT_IN

ROOT = Path(__file__).resolve().parents[2]


class LastIdsSelector(ExemplarSelector):
    """The eligible exemplars of the largest ids that fit, up to M."""

    name = "last_ids"

    def select(self, pool, request):
        idx, sims = candidates(pool, request)
        order = sorted(idx, key=lambda i: pool.ids[i], reverse=True)
        return make_selection(pool, request, greedy_fill(order, pool, request.capacity, self.max_exemplars), sims)


def _entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=SELECTORS_GROUP)


@pytest.fixture
def installed(monkeypatch):
    """``installed(*entry_points)``: what ``importlib.metadata`` lists for the selectors' group, the registry's
    plug-ins not read yet; the selectors registered are forgotten afterwards."""
    module = types.ModuleType("kdspy_fake_plugin")
    module.LastIdsSelector = LastIdsSelector
    module.not_a_selector = len
    monkeypatch.setitem(sys.modules, "kdspy_fake_plugin", module)
    monkeypatch.setitem(registry._PLUGINS, "loaded", False)
    before = dict(registry._REGISTRY)

    def install(*entry_points):
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group=None: [ep for ep in entry_points if ep.group == group])

    yield install
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before)


def test_an_installed_selector_is_registered_when_a_name_is_first_missed(installed):
    installed(_entry_point("last_ids", "kdspy_fake_plugin:LastIdsSelector"))
    assert "last_ids" not in registry._REGISTRY  # nothing read yet
    assert "last_ids" in SELECTORS and selector_class("last_ids") is LastIdsSelector
    assert registry._PLUGINS["loaded"]


def test_listing_the_selectors_reads_the_plugins(installed):
    installed(_entry_point("last_ids", "kdspy_fake_plugin:LastIdsSelector"))
    assert list(SELECTORS)[-1] == "last_ids" and len(SELECTORS) == len(BUILT_IN) + 1


def test_a_plugin_that_cannot_be_registered_is_one_warning_line_and_the_others_still_are(installed):
    installed(_entry_point("missing", "kdspy_no_such_module:Selector"),
              _entry_point("length", "kdspy_fake_plugin:not_a_selector"),
              _entry_point("seer", "kdspy_fake_plugin:LastIdsSelector"),  # a name taken
              _entry_point("last_ids", "kdspy_fake_plugin:LastIdsSelector"))
    with pytest.warns(PluginWarning) as caught:
        assert selector_class("last_ids") is LastIdsSelector
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3 and all("\n" not in m for m in messages)
    assert all(re.match(r"the knapsack_dspy\.selectors entry point '\w+ = [\w.:]+' \(distribution unknown\) is left "
                        r"out: ", m) for m in messages)
    assert "'length = kdspy_fake_plugin:not_a_selector'" in messages[0] and "not an ExemplarSelector" in messages[0]
    assert "ModuleNotFoundError" in messages[1] and "'seer'" in messages[2] and "taken" in messages[2]
    assert selector_class("seer").__name__ == "KnapsackSelector"  # the built-in one stays


def test_load_plugins_hands_each_value_over_and_counts_those_accepted(monkeypatch):
    points = [_entry_point("a", "json:dumps"), _entry_point("b", "json:loads")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: points if group == "g" else [])
    seen = []
    assert load_plugins("g", lambda ep, value: seen.append((ep.name, value.__name__))) == 2
    assert seen == [("a", "dumps"), ("b", "loads")]
    assert describe_entry_point(points[0]) == ("the knapsack_dspy.selectors entry point 'a = json:dumps' "
                                               "(distribution unknown)")


def test_the_docs_selector_table_names_every_built_in_selector():
    """docs/core.md's table of selectors ("| name | what it does | `mode` | `fit_on` |") lists the built-in ones:
    a built-in selector is its module, its line in ``BUILT_IN`` and its line in that table."""
    text = (ROOT / "docs" / "core.md").read_text(encoding="utf-8")
    table = text.split("| name | what it does | `mode` | `fit_on` |", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(names) == sorted(BUILT_IN)
