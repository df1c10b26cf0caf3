"""The verdict of a race: how much faster speculation was, and whether the two texts
are the target's own.

Greedy speculative decoding must reproduce greedy target-only decoding token for
token. In float32 it does; in bfloat16/float16 a verify of several tokens can round
differently from a one-token step and flip a near-tie (docs/design.md §3). So when the
texts differ, the verdict names the first token where they part and the target's
top-two logit margin there in both runs: both margins within `NEAR_TIE` of a tie is
rounding; anything else is a bug. A float32 replay settles it (they must be identical).
llama.cpp (a GGUF target: its dtype is a GGUF type such as Q4_1) verifies several tokens
with matrix-matrix kernels and decodes one with matrix-vector ones, activations quantized
per batch, so its logits differ by a few hundredths between the two as well.

Pure functions over the chat layer's events: no torch, no widgets.
"""

from __future__ import annotations

from dataclasses import dataclass

from specchat.chat.baseline import Baseline
from specchat.chat.events import AnswerDone, TokenSpan
from specchat.engine.theory import measured_speedup

NEAR_TIE = 0.25
"""Logit margin below which a half-precision flip is rounding: about two bfloat16 steps at
typical logit sizes (16–32, where one step is 0.125)."""
HALF_PRECISION = ("bfloat16", "float16")
TORCH_DTYPES = HALF_PRECISION + ("float32",)
LOAD_MOVED = 1.15
"""Ratio of the two runs' load factors beyond which the verdict says the machine's load moved
between the answer and its race: the gauge, which charges target-only the answer's load,
then misses the race by about that ratio."""


def may_round(dtype: str) -> bool:
    """Whether a verify of several tokens can give other logits than a one-token step:
    torch in half precision, and llama.cpp (GGUF types) in any."""
    return dtype in HALF_PRECISION or dtype not in TORCH_DTYPES


def _rounding_note(dtype: str) -> str:
    if dtype in HALF_PRECISION:
        return f"{dtype} rounding, not a bug; the float32 replay (palette) must be identical"
    return (f"llama.cpp ({dtype}) computes a several-token verify with other kernels than a "
            "one-token step, not a bug")


def committed(spans: tuple[TokenSpan, ...]) -> list[TokenSpan]:
    return [s for s in spans if s.kind != "rejected"]


@dataclass(frozen=True)
class Parting:
    """Where two answers first chose different tokens."""

    index: int
    """Committed tokens before the first difference."""
    speculative: TokenSpan | None
    target_only: TokenSpan | None

    @property
    def margins(self) -> tuple[float | None, float | None]:
        return (None if self.speculative is None else self.speculative.margin,
                None if self.target_only is None else self.target_only.margin)

    @property
    def near_tie(self) -> bool:
        known = [m for m in self.margins if m is not None]
        return bool(known) and all(m <= NEAR_TIE for m in known)


def first_parting(spec: AnswerDone, plain: AnswerDone) -> Parting | None:
    """The first committed token at which the answers differ (None: identical ids)."""
    a, b = committed(spec.spans), committed(plain.spans)
    for i, (x, y) in enumerate(zip(a, b)):
        if x.token_id != y.token_id:
            return Parting(i, x, y)
    if len(a) != len(b):
        i = min(len(a), len(b))
        return Parting(i, a[i] if i < len(a) else None, b[i] if i < len(b) else None)
    return None


@dataclass(frozen=True)
class RaceVerdict:
    """Both runs' decode speeds, the gauge's estimate beside the race, and the texts' fate."""

    spec_tokens_per_s: float | None
    plain_tokens_per_s: float | None
    gauge: float | None
    """The live gauge's speedup for the speculative answer (target-only at the same contexts)."""
    greedy: bool
    dtype: str
    parting: Parting | None
    answer_load: float | None = None
    """How much slower than idle the speculative answer's rounds ran (`Baseline.load_factor`)."""
    race_load: float | None = None
    """The same for the race's target-only rounds."""

    @property
    def load_moved(self) -> bool:
        """Whether the machine ran the race under another load than the answer."""
        if not self.answer_load or not self.race_load:
            return False
        return max(self.answer_load, self.race_load) / min(self.answer_load, self.race_load) > LOAD_MOVED

    @property
    def ratio(self) -> float | None:
        """The race's measured speedup (theory.measured_speedup)."""
        return measured_speedup(self.spec_tokens_per_s, self.plain_tokens_per_s)


def race_verdict(spec: AnswerDone, plain: AnswerDone, gauge: float | None, greedy: bool,
                 dtype: str, baseline: Baseline | None = None) -> RaceVerdict:
    """`baseline`: the one the gauge used; with it the verdict names both runs' loads."""
    loads = ((None, None) if baseline is None
             else (baseline.load_factor(spec.stats), baseline.load_factor(plain.stats)))
    return RaceVerdict(spec.stats.tokens_per_s, plain.stats.tokens_per_s, gauge, greedy, dtype,
                       first_parting(spec, plain), *loads)


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def describe_speed(verdict: RaceVerdict) -> str:
    ratio = "–" if verdict.ratio is None else f"{verdict.ratio:.2f}×"
    return (f"race: speculative {_rate(verdict.spec_tokens_per_s)} tok/s vs target-only "
            f"{_rate(verdict.plain_tokens_per_s)} tok/s → {ratio}{_gauge_note(verdict)}")


def _gauge_note(verdict: RaceVerdict) -> str:
    """The gauge's estimate, and the load each run ran under where the baseline timed both."""
    if verdict.gauge is None:
        return ""
    estimate = f"the gauge estimated {verdict.gauge:.2f}×"
    if not verdict.answer_load or not verdict.race_load:
        return f" ({estimate})"
    loads = (f"{estimate} at load ×{verdict.answer_load:.2f} of idle; "
             f"the race ran at ×{verdict.race_load:.2f}")
    moved = ": the machine's load moved between them, race again (F5)" if verdict.load_moved else ""
    return f" ({loads}{moved})"


def describe_texts(verdict: RaceVerdict) -> str:
    """One line on the texts: identical, sampled, rounding at a near-tie, or a bug to report."""
    parting = verdict.parting
    if parting is None:
        return "texts identical ✓"
    if not verdict.greedy:
        return "texts differ: sampling at temperature > 0 differs run to run"
    where = f"texts part at token {parting.index + 1}: " + _choices(parting)
    if may_round(verdict.dtype) and parting.near_tie:
        return f"{where} — a near-tie, {_rounding_note(verdict.dtype)}"
    return f"{where} — not a near-tie: this is a bug, please report it"


def _choices(parting: Parting) -> str:
    def one(label: str, span: TokenSpan | None) -> str:
        if span is None:
            return f"{label} ended"
        margin = "?" if span.margin is None else f"{span.margin:.3f}"
        return f"{label} chose {span.text!r} (top-two margin {margin})"

    return f"{one('speculative', parting.speculative)}, {one('target-only', parting.target_only)}"


def describe(verdict: RaceVerdict) -> str:
    return f"{describe_speed(verdict)}; {describe_texts(verdict)}"


@dataclass(frozen=True)
class IdentityCheck:
    """A greedy float32 replay of the last prompt, speculative and target-only."""

    tokens: int
    parting: Parting | None

    def describe(self) -> str:
        if self.parting is None:
            return f"float32 replay: speculative and target-only identical over {self.tokens} tokens ✓"
        return (f"float32 replay: they part at token {self.parting.index + 1} "
                f"({_choices(self.parting)}) — in float32 this is a bug, please report it")
