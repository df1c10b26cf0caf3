"""`bench turns`: a conversation's next question, with the caches kept and read again.

Each prompt of the set is a chat's first question, answered by a `ChatSession` as the chat
answers it. Then a follow-up question is asked twice from that same conversation:
- `kept`: as the chat asks it, the caches keeping what they read of the first exchange
  (engine/held_tokens.py), so only the follow-up's own tokens are read;
- `read`: from empty caches, the whole conversation read again (every answer did this
  before the caches were kept).
`kept` runs first, right after the first answer, when the caches hold exactly what a chat's
would; `read` needs no state. Both start from the same sampling state and the same k = auto
policy. Per arm: TTFT (which carries the reading), the tokens read, the answer's wall time;
per category and in total the medians and their ratios, and how many answer pairs are the
same tokens. Knows the chat session and the prompt set, not the UI.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from specchat.bench.prompts import BenchPrompt
    from specchat.bench.reports import RunMeta
    from specchat.chat.pair import Pair
    from specchat.chat.session import ChatSession

FOLLOW_UP = "Thank you. Now say that again in one short paragraph."
ARMS = ("kept", "read")
ARM_LABELS = {"kept": "the chat, caches kept from the first exchange",
              "read": "empty caches, the conversation read again"}


@dataclass(frozen=True)
class TurnRun:
    """One answer to the follow-up."""

    ttft_s: float
    seconds: float
    prompt_tokens: int
    kept_tokens: int
    tokens: int
    ids: tuple[int, ...] = field(repr=False)

    @property
    def read_tokens(self) -> int:
        return self.prompt_tokens - self.kept_tokens


def ask(session: ChatSession, text: str, max_new_tokens: int) -> TurnRun:
    """The session's answer to `text`, timed by the wall clock."""
    from specchat.chat.events import AnswerDone

    started = time.perf_counter()
    done = None
    for event in session.answer(text, max_new_tokens):
        if isinstance(event, AnswerDone):
            done = event
    seconds = time.perf_counter() - started
    if done is None:
        raise RuntimeError("the answer ended without its last event")
    stats = done.stats
    ids = tuple(span.token_id for span in done.spans if span.kind != "rejected")
    return TurnRun(stats.ttft_s or 0.0, seconds, stats.prompt_tokens, stats.kept_tokens,
                   stats.tokens, ids)


def follow_up_runs(pair: Pair, prompt: str, follow_up: str, max_new_tokens: int,
                   seed: int) -> dict[str, TurnRun]:
    """The first answer to `prompt`, then `follow_up` answered by each arm (module docstring)."""
    from specchat.chat.session import ChatSession

    session = ChatSession(pair, seed=seed)
    ask(session, prompt, max_new_tokens)
    turns, settings = list(session.conversation.turns), session.settings
    state = session.generator.get_state()
    runs = {}
    for arm in ARMS:
        session.conversation.turns = list(turns)
        session.settings = copy.deepcopy(settings)  # the same k = auto policy for both
        session.generator.set_state(state)
        session.keep_limit = None if arm == "kept" else 0
        runs[arm] = ask(session, follow_up, max_new_tokens)
    return runs


@dataclass
class TurnsReport:
    """`bench turns`: per prompt, category and in total (module docstring)."""

    meta: RunMeta
    follow_up: str
    prompts: list[dict]
    categories: dict[str, dict]
    total: dict

    def as_dict(self) -> dict:
        return {**self.meta.as_dict(), "arms": dict(ARM_LABELS), "follow_up": self.follow_up,
                "prompts": self.prompts, "categories": self.categories, "total": self.total}

    def format(self) -> str:
        from specchat.bench.format import header_lines, table

        rows = [["category", "n", "read kept", "read again", "TTFT kept", "TTFT again",
                 "ratio", "answer kept", "answer again", "ratio", "same"]]
        for name, row in [*self.categories.items(), ("TOTAL", self.total)]:
            rows.append([name, str(row["prompts"]), f"{row['read_tokens']['kept']:.0f}",
                         f"{row['read_tokens']['read']:.0f}", f"{row['ttft_s']['kept']:.2f} s",
                         f"{row['ttft_s']['read']:.2f} s", f"{row['ttft_ratio']:.1f}x",
                         f"{row['seconds']['kept']:.2f} s", f"{row['seconds']['read']:.2f} s",
                         f"{row['seconds_ratio']:.2f}x", f"{row['identical']}/{row['prompts']}"])
        return "\n".join([*header_lines(self.as_dict()), f"follow-up: {self.follow_up!r}", "",
                          table(rows), "",
                          "medians per arm (read: prompt tokens read; answer: its wall time); "
                          "ratio = again / kept; same: answer pairs of identical tokens"])


def summary(rows: Sequence[dict[str, TurnRun]]) -> dict:
    """Medians of each arm's TTFT, tokens read and answer time; their ratios; identical pairs."""
    def median(arm: str, value: Callable[[TurnRun], float]) -> float:
        return statistics.median(value(row[arm]) for row in rows)

    ttft = {arm: median(arm, lambda r: r.ttft_s) for arm in ARMS}
    seconds = {arm: median(arm, lambda r: r.seconds) for arm in ARMS}
    return {"prompts": len(rows),
            "read_tokens": {arm: median(arm, lambda r: r.read_tokens) for arm in ARMS},
            "ttft_s": ttft, "seconds": seconds,
            "ttft_ratio": ratio(ttft["read"], ttft["kept"]),
            "seconds_ratio": ratio(seconds["read"], seconds["kept"]),
            "identical": sum(row["kept"].ids == row["read"].ids for row in rows)}


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def run_turns(pair: Pair, prompts: Sequence[BenchPrompt], path: Path, max_new_tokens: int,
              seed: int, follow_up: str = FOLLOW_UP,
              on_prompt: Callable[[str, dict[str, TurnRun]], None] = lambda *_: None,
              keep_going: Callable[[], bool] = lambda: True) -> TurnsReport:
    """Every prompt's follow-up, both arms (after one warm-up answer)."""
    from specchat.bench.modes import run_meta

    follow_up_runs(pair, prompts[0].prompt, follow_up, 8, seed)  # warm-up
    answered: list[tuple[BenchPrompt, dict[str, TurnRun]]] = []
    for prompt in prompts:
        if not keep_going():
            break
        runs = follow_up_runs(pair, prompt.prompt, follow_up, max_new_tokens, seed)
        answered.append((prompt, runs))
        on_prompt(prompt.id, runs)
    if not answered:
        raise RuntimeError("no prompt was answered within the budget")
    per_prompt = [{"id": p.id, "category": p.category,
                   **{arm: {k: v for k, v in asdict(run).items() if k != "ids"}
                      for arm, run in runs.items()},
                   "identical": runs["kept"].ids == runs["read"].ids} for p, runs in answered]
    categories: dict[str, list[dict[str, TurnRun]]] = {}
    for prompt, runs in answered:
        categories.setdefault(prompt.category, []).append(runs)
    meta = replace(run_meta(pair, path, max_new_tokens, len(answered)),
                   prompts_left=len(prompts) - len(answered))
    return TurnsReport(meta, follow_up, per_prompt,
                       {name: summary(rows) for name, rows in categories.items()},
                       summary([runs for _, runs in answered]))
