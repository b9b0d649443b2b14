"""Adapters that send demos in the order they are given.

DSPy's adapters (``ChatAdapter`` and its subclasses ``JSONAdapter`` / ``XMLAdapter``, through the base
``Adapter.format_demos``) send *incomplete* demos (an output field missing, e.g. a pool example without a
``ChainOfThought``'s ``reasoning``) before *complete* ones. A selecting predictor sends its own demos (another
optimizer's, e.g. bootstrapped with their reasoning: complete) as a prefix, then a static set or hybrid core, then
the per-query exemplars, the most similar next to the question; DSPy's grouping would move the complete prefix
demos last, next to the question, so they would be neither a prefix (prompt caching, the latency budget's shared
prefix) nor where the most similar exemplar belongs.

The ordered adapters format each demo exactly as their DSPy base class formats it alone (the same messages, the same
"some fields are not supplied" note on an incomplete one) and keep the given order. For demos that are all
complete or all incomplete (the document pipelines, a ``Predict`` with a labelled trainset) the prompt is the one
DSPy's adapter sends. :func:`in_given_order` turns one of DSPy's adapters into its ordered twin (same settings); any
other adapter class is kept as it is and orders demos its own way.
"""

from __future__ import annotations

from typing import Any

import dspy

__all__ = ["DemosInGivenOrder", "OrderedChatAdapter", "OrderedJSONAdapter", "OrderedXMLAdapter", "in_given_order",
           "keeps_demo_order"]


class DemosInGivenOrder:
    """Mixin for a DSPy adapter: ``format_demos`` keeps the given order (each demo formatted on its own).

    A plain mixin, not an ``Adapter`` subclass: DSPy's ``Adapter.__init_subclass__`` wraps ``format`` / ``parse``
    on every subclass, which here would shadow the adapter's own ``format``."""

    def format_demos(self, signature, demos):
        adapter: Any = super()  # the DSPy adapter this is mixed into (before it in the MRO)
        messages = []
        for demo in demos:
            messages.extend(adapter.format_demos(signature, [demo]))
        return messages


class OrderedChatAdapter(DemosInGivenOrder, dspy.ChatAdapter):
    """``dspy.ChatAdapter`` sending demos in the given order."""


class OrderedJSONAdapter(DemosInGivenOrder, dspy.JSONAdapter):
    """``dspy.JSONAdapter`` sending demos in the given order."""


class OrderedXMLAdapter(DemosInGivenOrder, dspy.XMLAdapter):
    """``dspy.XMLAdapter`` sending demos in the given order."""


_ORDERED = {dspy.ChatAdapter: OrderedChatAdapter, dspy.JSONAdapter: OrderedJSONAdapter,
            dspy.XMLAdapter: OrderedXMLAdapter}


def in_given_order(adapter: Any) -> Any:
    """The ordered twin of one of DSPy's adapters, with the same settings (a new object); an ordered adapter or
    any other adapter class is returned as it is."""
    ordered = _ORDERED.get(type(adapter))
    if ordered is None:
        return adapter
    twin = ordered.__new__(ordered)
    twin.__dict__.update(vars(adapter))
    return twin


def keeps_demo_order(adapter: Any) -> bool:
    """Whether ``adapter`` sends demos in the order it is given (the ordered adapters)."""
    return isinstance(adapter, DemosInGivenOrder)
