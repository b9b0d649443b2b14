"""Token costs measured in the real prompt format, with the target model's tokenizer.

An exemplar's cost is what it adds to the prompt as the DSPy adapter formats it (a user/assistant
message pair per demo) counted by the model's own tokenizer. The capacity left for exemplars for one
query is ``budget - tokens(query prompt without demos) - reserved output tokens``. A selectable input's pieces are
measured the same way (``field_tokens``: the field's text as the adapter writes it, for
``selectable_context.measure_pieces``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import dspy
from dspy.adapters.utils import format_field_value

from knapsack_dspy.memo import BoundedMemo
from knapsack_dspy.modules.demo_order import in_given_order
from knapsack_dspy.modules.demo_templates import DemoTemplate


class TokenCounter(Protocol):
    def count_messages(self, messages: list[dict]) -> int: ...


# A fixed system message as an anchor: the difference "with demo" minus "without" then holds exactly the
# demo's messages plus their per-message template tokens, whatever the chat template adds around them.
_ANCHOR = [{"role": "system", "content": "x"}]

# Costs shared by every cost model of a process: a benchmark compiles the same pool once per selector and
# sizes the same queries for each, and formatting a demo or a prompt again costs ~1 ms. Keyed on everything a
# count depends on (the counter object itself, not its name: two counters may count differently).
_counts = BoundedMemo(200_000)


def pinned_adapter(adapter: Any = None) -> Any:
    """The adapter a compiled predictor formats its prompts with (and its costs are measured with): ``adapter``,
    else the configured one, else a ``ChatAdapter``; one of DSPy's adapters becomes its twin that sends demos in
    the given order (``demo_order.in_given_order``: another optimizer's demos stay a prefix), and a ChatAdapter's
    JSON fallback is switched off (on a copy), because after a reply it cannot parse it would re-send the question
    in another format, which is not the prompt that was measured (the parse error is raised instead, and the
    solvers record it)."""
    adapter = adapter if adapter is not None else (dspy.settings.adapter or dspy.ChatAdapter())
    adapter = in_given_order(adapter)
    if getattr(adapter, "use_json_adapter_fallback", False):
        adapter = copy.copy(adapter)
        adapter.use_json_adapter_fallback = False
    return adapter


def _count_batch(counter, batch: list[list[dict]]) -> list[int]:
    """``counter``'s counts of ``batch`` (its ``count_messages_batch`` when it has one)."""
    many = getattr(counter, "count_messages_batch", None)
    return list(many(batch)) if callable(many) else [counter.count_messages(m) for m in batch]


class PromptCostModel:
    """Counts prompt tokens for one predictor's signature.

    ``adapter`` defaults to the configured DSPy adapter (``ChatAdapter`` when none is set); ``counter`` is
    a ``TokenCounter`` for the target model (see ``knapsack_dspy.llm.token_counter.get_token_counter``).
    """

    def __init__(self, signature: type[dspy.Signature], counter: TokenCounter, adapter: Any = None):
        self.signature = signature
        self.counter = counter
        self.adapter = adapter or dspy.settings.adapter or dspy.ChatAdapter()
        self._adapter_key = (type(self.adapter).__qualname__,
                             json.dumps(vars(self.adapter), sort_keys=True, default=repr))  # its settings
        self._anchor_tokens = counter.count_messages(list(_ANCHOR))
        self._template: DemoTemplate | None = None  # formats many demos at once (demo_costs), made when first needed

    @property
    def adapter_key(self) -> str:
        """The adapter and its settings, as text (what a demo's cost depends on besides the signature and the
        tokenizer; part of a pool store's hash)."""
        return json.dumps(self._adapter_key)

    def _demo_messages(self, demo: Mapping) -> list[dict]:
        return self.adapter.format_demos(self.signature, [dict(demo)])

    def _memo_key(self, kind: str, *parts: Any) -> tuple | None:
        try:
            content = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
            key = (kind, self.signature, self._adapter_key, self.counter,
                   hashlib.sha256(content.encode()).hexdigest())  # a digest: keys stay small
            hash(key)
        except TypeError:  # an unhashable signature or counter: no memo
            return None
        return key

    def demo_cost(self, demo: Mapping) -> int:
        """Tokens one demo adds to any prompt of this signature."""
        key = self._memo_key("demo", dict(demo))
        return self._count_demo(demo) if key is None else _counts.get_or_compute(key, lambda: self._count_demo(demo))

    def _anchored_demo(self, demo: Mapping, templated: bool = False) -> list[dict]:
        """The anchor message followed by ``demo``'s messages: what is counted (less the anchor's tokens).
        ``templated``: formatted by the signature's :class:`DemoTemplate` (the same messages, without the adapter's
        per-field work when it applies)."""
        if templated:
            if self._template is None:
                self._template = DemoTemplate(self.adapter, self.signature)
            messages = self._template.messages(demo)
        else:
            messages = self._demo_messages(demo)
        if not messages:
            raise ValueError(f"demo has none of the fields of {self.signature.__name__}: {sorted(dict(demo))}")
        return list(_ANCHOR) + messages

    def _count_demo(self, demo: Mapping) -> int:
        return int(self.counter.count_messages(self._anchored_demo(demo)) - self._anchor_tokens)

    def demo_costs(self, demos: Sequence[Mapping], *, batch_size: int = 512, progress: bool = False) -> list[int]:
        """``[demo_cost(d) for d in demos]`` (the same counts), measured in batches: the demos not yet known are
        formatted from the signature's demo template (``demo_templates``: the adapter's messages without its
        per-field work) and handed to the counter together (``count_messages_batch``: a local model's server
        tokenizes a batch in one request). ``progress``: a progress bar."""
        out: list[int] = []
        bar = None
        if progress:
            from tqdm.auto import tqdm  # only when a bar is asked for

            bar = tqdm(total=len(demos), desc="measuring token costs", unit="demo", leave=False)
        for start in range(0, len(demos), batch_size):
            chunk = [dict(d) for d in demos[start:start + batch_size]]
            keys = [self._memo_key("demo", d) for d in chunk]
            costs: list[int | None] = [None if key is None else _counts.get(key) for key in keys]
            todo = [i for i, cost in enumerate(costs) if cost is None]
            fresh: dict[int, int] = {}
            if todo:
                counted = _count_batch(self.counter, [self._anchored_demo(chunk[i], templated=True) for i in todo])
                for i, count in zip(todo, counted, strict=True):
                    fresh[i] = int(count - self._anchor_tokens)
                    key = keys[i]
                    if key is not None:
                        _counts.put(key, fresh[i])
            out += [fresh[i] if cost is None else int(cost) for i, cost in enumerate(costs)]
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        return out

    def prompt_tokens(self, inputs: Mapping, demos: Sequence[Mapping] = ()) -> int:
        """Tokens of the fully assembled prompt (system + demos + query)."""
        shown = [dict(d) for d in demos]
        key = self._memo_key("prompt", dict(inputs), shown)
        return self._count_prompt(inputs, shown) if key is None else \
            _counts.get_or_compute(key, lambda: self._count_prompt(inputs, shown))

    def _count_prompt(self, inputs: Mapping, demos: list[dict]) -> int:
        return int(self.counter.count_messages(self.adapter.format(self.signature, demos, dict(inputs))))

    def prefix_tokens(self, demos: Sequence[Mapping] = ()) -> int:
        """Tokens every prompt of this signature opening with ``demos`` shares: the system message and those
        demos (a prompt cache's reusable prefix; counted with the chat template's framing of one prompt)."""
        shown = [dict(d) for d in demos]
        key = self._memo_key("prefix", shown)
        return self._count_prefix(shown) if key is None else \
            _counts.get_or_compute(key, lambda: self._count_prefix(shown))

    def _count_prefix(self, demos: list[dict]) -> int:
        system = {"role": "system", "content": self.instructions()}
        return int(self.counter.count_messages([system, *self.adapter.format_demos(self.signature, demos)]))

    def instructions(self) -> str:
        """The system message every prompt of this signature opens with, as the adapter writes it (the fields'
        descriptions and the instructions): the same in every prompt, whatever the demos and inputs."""
        return self.adapter.format_system_message(self.signature)

    def field_tokens(self, name: str, values: Sequence[Any]) -> list[int]:
        """Tokens of input field ``name`` holding each of ``values``, as the adapter writes a field (its header and
        DSPy's ``format_field_value`` of the value) in a user message, counted after the anchor (batched; remembered
        per process). Differences between two values are what one adds to a prompt over the other."""
        info = self.signature.input_fields[name]
        texts = [f"[[ ## {name} ## ]]\n{format_field_value(field_info=info, value=value)}" for value in values]
        keys = [self._memo_key("field", text) for text in texts]
        known: list[int | None] = [None if key is None else _counts.get(key) for key in keys]
        todo = [i for i, count in enumerate(known) if count is None]
        fresh: dict[int, int] = {}
        if todo:
            batch = [[*_ANCHOR, {"role": "user", "content": texts[i]}] for i in todo]
            for i, count in zip(todo, _count_batch(self.counter, batch), strict=True):
                fresh[i] = int(count - self._anchor_tokens)
                key = keys[i]
                if key is not None:
                    _counts.put(key, fresh[i])
        return [fresh[i] if count is None else int(count) for i, count in enumerate(known)]

    def base_tokens(self, inputs: Mapping) -> int:
        """Tokens of the query's own prompt (no demos)."""
        return self.prompt_tokens(inputs, ())
