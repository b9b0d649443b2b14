"""The report's ``## Prompt tokens: counted here and reported by the model`` section.

Per run, over the LM calls a provider answered (``reported_prompt_tokens`` / ``counted_prompt_tokens`` of the rows,
``bench.execution.call_tokens``): how often the project's own count of a call's prompt -- what its budget was
checked with -- equals the prompt tokens the provider reported, and when it does not, how the two differ: by the
same number on every call (tokens the counter does not see, such as a chat template's framing or a BOS token), or
by a ratio (an estimate: another tokenizer). Beside it, the share of the reported prompt tokens the provider's
prompt cache served (``cached_prompt_tokens`` / ``prompt_tokens_used``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from knapsack_dspy.bench.results.row_schema import as_row

__all__ = ["RunTokenAgreement", "token_agreement", "token_agreement_lines"]


@dataclass
class RunTokenAgreement:
    """One run's calls with both counts: their differences (reported - counted), the sums, who counted."""

    differences: list[int] = field(default_factory=list)
    counted: int = 0
    reported: int = 0
    cached: int = 0
    prompt_used: int = 0
    counts: set[str] = field(default_factory=set)  # token_count of the rows: exact / estimate

    @property
    def calls(self) -> int:
        return len(self.differences)

    @property
    def identical(self) -> int:
        return sum(d == 0 for d in self.differences)

    @property
    def cached_share(self) -> float | None:
        return self.cached / self.prompt_used if self.prompt_used else None

    def explanation(self) -> str:
        """How the counts differ, in words."""
        if self.identical == self.calls:
            return "identical on every call"
        distinct = set(self.differences)
        if len(distinct) == 1:
            (difference,) = distinct
            return (f"reported = counted {difference:+d} on every call: tokens the counter does not see in each "
                    "prompt (a chat template's framing, a BOS token)")
        ratio = self.reported / self.counted if self.counted else float("nan")
        spread = (f"median {statistics.median(self.differences):+g}, {min(self.differences):+d} to "
                  f"{max(self.differences):+d} tokens")
        if "estimate" in self.counts:
            return f"an estimate (another tokenizer): reported / counted {ratio:.3f} ({spread})"
        return f"{self.calls - self.identical} calls differ ({spread}; reported / counted {ratio:.3f})"


def token_agreement(rows: Iterable[Mapping]) -> dict[str, RunTokenAgreement]:
    """Per run key, the agreement of its rows' counted and reported prompt tokens (runs without any: left out)."""
    out: dict[str, RunTokenAgreement] = {}
    for row in map(as_row, rows):
        reported = row.reported_prompt_tokens or []
        counted = row.counted_prompt_tokens or []
        pairs = [(r, c) for r, c in zip(reported, counted, strict=False)
                 if isinstance(r, int) and isinstance(c, int)]
        if not pairs:
            continue
        run = out.setdefault(row.run, RunTokenAgreement())
        run.differences += [r - c for r, c in pairs]
        run.reported += sum(r for r, _ in pairs)
        run.counted += sum(c for _, c in pairs)
        run.cached += int(row.cached_prompt_tokens or 0)
        run.prompt_used += int(row.prompt_tokens_used or 0)
        run.counts.add(row.token_count or "exact")
    return out


def token_agreement_lines(rows: Iterable[Mapping], metrics: Mapping[str, Mapping] | None = None) -> list[str]:
    """The report section (nothing when no row records both counts: rows written before they were)."""
    agreement = token_agreement(rows)
    if not agreement:
        return []
    lines = ["## Prompt tokens: counted here and reported by the model", "",
             "Per LM call a provider answered: the project's own count of the call's prompt (what the budget was "
             "checked with) beside the prompt tokens the provider reported, and the share of those its prompt "
             "cache served.", "",
             "| run | counted | calls | identical | how they differ | cached share |",
             "|---|---|---|---|---|---|"]
    for run, figures in agreement.items():
        m = (metrics or {}).get(run) or {}
        spec = m.get("spec") or {}
        label = f"{m.get('label', run)} ({spec.get('model')})" if spec.get("model") else str(m.get("label", run))
        share = figures.cached_share
        lines.append(f"| {label} | {' / '.join(sorted(figures.counts))} | {figures.calls} | "
                     f"{figures.identical} ({100 * figures.identical / figures.calls:.0f} %) | "
                     f"{figures.explanation()} | {'—' if share is None else f'{100 * share:.0f} %'} |")
    return [*lines, ""]
