"""No demos: the zero-shot baseline of a pipeline -- the same instructions and rendering as with any other
selector, and no exemplars; what the exemplars add is the difference. (Named ``no_demos``, not ``zero_shot``,
which is the name of a *pipeline* with its own direct-answer signature.)"""

from __future__ import annotations

from knapsack_dspy.selection.exemplar_pool import query_values
from knapsack_dspy.selection.selectors.base import ExemplarSelector, make_selection


class NoDemosSelector(ExemplarSelector):
    name = "no_demos"
    selects_demos = False

    def select(self, pool, request):
        return make_selection(pool, request, [], query_values(pool, request))
