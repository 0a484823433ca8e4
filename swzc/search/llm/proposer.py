"""The LLM as a proposer: one request per candidate, the reply restricted before anything compiles it.

Each request carries the kernel, the hardware and the whole history (swzc.search.llm.prompt); each reply's body is
checked against the safe subset (swzc.search.llm.restrict) and becomes a CustomSwizzle, which the search loop
then proves, predicts and measures like any built-in (swzc.search.proposers).  Every exchange is kept, with the
verdict its candidate got, for the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from swzc.search.llm import prompt
from swzc.search.llm.client import Client, Exchange, LlmError
from swzc.search.llm.restrict import check_body
from swzc.search.proposers import KernelTask, Proposed, Tried
from swzc.formulas.swizzles import CustomSwizzle


@dataclass(frozen=True)
class Transcript:
    """One kernel's exchanges with the LLM, each with what became of its candidate."""

    kernel: str
    exchanges: tuple[Exchange, ...]


class LlmProposer:
    """Asks the LLM for one body per call; gives up on the kernel (returns None) after a failed request when
    `fall_back` is set (the built-in proposer carries on), else lets the LlmError end the run."""

    name = "llm"

    def __init__(self, client: Client, fall_back: bool = False) -> None:
        self.client = client
        self.fall_back = fall_back
        self.exchanges: list[tuple[str, Exchange, int]] = []  # (kernel, exchange, index of its Tried in the history)
        self.failure: str = ""  # why the LLM was given up, under fall_back

    def propose(self, task: KernelTask, history: Sequence[Tried]) -> Proposed | None:
        if self.failure:
            return None
        try:
            reply, exchange = self.client.ask(prompt.messages(task, history))
        except LlmError as exc:
            exchange = getattr(exc, "exchange", None)
            if exchange is not None:
                self.exchanges.append((task.kernel.name, replace(exchange, verdict=f"no reply: {exc.message}"), -1))
            if not self.fall_back:
                raise
            self.failure = exc.message
            return None
        self.exchanges.append((task.kernel.name, exchange, len(history)))
        label = _label(reply.name)
        checked = check_body(reply.body)
        if not checked.ok:
            why = "; ".join(v.message for v in checked.violations[:5])
            return Proposed(self.name, None, reply.expectation, f"outside the safe subset: {why}", label)
        return Proposed(self.name, CustomSwizzle(label, checked.body, reply.body), reply.expectation)

    def transcripts(self, histories: dict[str, Sequence[Tried]]) -> tuple[Transcript, ...]:
        """The exchanges per kernel, each with the verdict its candidate got in that kernel's history."""
        out: dict[str, list[Exchange]] = {}
        for kernel, exchange, at in self.exchanges:
            history = histories.get(kernel, ())
            if 0 <= at < len(history) and not exchange.verdict:
                t = history[at]
                exchange = replace(exchange, verdict=f"{t.name}: {t.status}: {t.detail}")
            out.setdefault(kernel, []).append(exchange)
        return tuple(Transcript(k, tuple(v)) for k, v in out.items())


def _label(name: str) -> str:
    """The reply's name as a label swzc may put in a comment: its safe characters, at most 40."""
    kept = re.sub(r"[^A-Za-z0-9_.:-]", "", name)[:40]
    return kept or "llm"
