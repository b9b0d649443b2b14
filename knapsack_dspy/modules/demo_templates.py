"""Many demos of one signature formatted fast, byte for byte as the adapter formats each one alone.

DSPy's adapters format a demo field by field, and ``format_field_value`` builds a pydantic ``TypeAdapter`` for
every value (~0.1-0.2 ms a field): once token counting was batched, formatting was most of the time spent measuring
a pool's token costs. DSPy's ``ChatAdapter`` family puts a complete demo's string values into fixed text unchanged,
so a :class:`DemoTemplate` formats the signature's demo once with marker values (``text_holes.probe``) and every
demo after that is the fixed text with its own values put in (``text_holes.fill``).

The template formats a demo only when all of these hold; otherwise the adapter formats it (the messages are the
same either way: ``tests/optimizer/test_pool_measurement_batches.py`` compares them on the real TAT-QA pool):

- the adapter is one of DSPy's ``ChatAdapter`` / ``JSONAdapter`` / ``XMLAdapter`` or their ordered twins
  (``demo_order``), exactly: a subclass may format values its own way. ``JSONAdapter`` escapes values into JSON,
  so its probe fails and it keeps formatting every demo;
- the probe succeeded: each field's marker once and verbatim, the same fixed text and roles for two sets of
  markers, messages of a role and a string content only;
- the demo has every field of the signature, each a plain string (``text_holes.plain_value``: not empty, no
  whitespace at either end, where the adapters' ``strip`` of a message could reach into it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dspy

from knapsack_dspy import text_holes
from knapsack_dspy.modules.demo_order import OrderedChatAdapter, OrderedJSONAdapter, OrderedXMLAdapter

__all__ = ["DemoTemplate"]

#: The adapters whose formatting of string values is known to be verbatim (exact types: see the module docstring).
TEMPLATED_ADAPTERS = (dspy.ChatAdapter, dspy.JSONAdapter, dspy.XMLAdapter, OrderedChatAdapter, OrderedJSONAdapter,
                      OrderedXMLAdapter)


class DemoTemplate:
    """One signature's demo as ``adapter`` formats it, with each field a hole (see the module docstring)."""

    def __init__(self, adapter: Any, signature: type[dspy.Signature]):
        self.adapter = adapter
        self.signature = signature
        self.fields = list(signature.fields)
        self._template: text_holes.Template | None = None
        self._roles: tuple[str, ...] = ()
        if type(adapter) in TEMPLATED_ADAPTERS and self.fields:
            self._probe()

    def _probe(self) -> None:
        roles = set()

        def render(values: list[str]) -> list[str]:
            messages = self.adapter.format_demos(self.signature, [dict(zip(self.fields, values, strict=True))])
            if not all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages):
                raise ValueError("not plain text messages")
            roles.add(tuple(m["role"] for m in messages))
            return [m["content"] for m in messages]

        try:
            template = text_holes.probe(render, len(self.fields))
        except Exception:  # noqa: BLE001  (an adapter that cannot format markers: it formats every demo itself)
            template = None
        if template is not None and len(roles) == 1:
            self._template, self._roles = template, roles.pop()

    @property
    def active(self) -> bool:
        """Whether demos with plain string values are formatted from the template."""
        return self._template is not None

    def messages(self, demo: Mapping) -> list[dict]:
        """``adapter.format_demos(signature, [demo])``: from the template when it applies, else the adapter's."""
        if self._template is not None:
            values = [demo.get(name) for name in self.fields]
            texts = [v for v in values if text_holes.plain_value(v)]
            if len(texts) == len(values):  # every value a plain text
                return [{"role": role, "content": content}
                        for role, content in zip(self._roles, text_holes.fill(self._template, texts), strict=True)]
        return self.adapter.format_demos(self.signature, [dict(demo)])
