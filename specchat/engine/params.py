"""The engine's knobs as plain values: how logits become a token (`SamplingParams`) and
the range of every whole-number knob (`Bound`), the draft length's above all.

This is the one owner of these settings and bounds (`RealBound` for temperature and top_p,
which must also be finite numbers): the config file, the command line,
the chat's keys and palette, adaptive k and the models' own baselines import them from
here. Standard library only (no torch), so that every layer may import it: the models
layer as well (tests/test_layering.py allows `engine.params` beside `engine.protocol`).
Knows nothing about text, files or screens: a `Bound` says what is wrong with a value,
and its caller says where the value came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_TEMPERATURE = 2.0 ** -126
"""float32's smallest normal number: below it a temperature is greedy (float32 cannot
represent 1 / T)."""


@dataclass(frozen=True)
class SamplingParams:
    """How logits become a token: the same processing for the target's p and the draft's q."""

    temperature: float = 0.0
    """0 is greedy; above 0 divides the logits before the softmax."""
    top_k: int = 0
    """Keep only the k most likely tokens; 0 keeps all."""
    top_p: float = 1.0
    """Keep the smallest set of tokens whose probability reaches top_p; 1.0 keeps all."""

    @property
    def greedy(self) -> bool:
        """Temperature 0, or one below float32's smallest normal number (no float32
        division by it is safe): both mean "always the argmax"."""
        return self.temperature < MIN_TEMPERATURE


class Limit:
    """What `Bound` and `RealBound` share: a value's problem as a message after the knob's
    name. A subclass says what the problem is (`problem`)."""

    def problem(self, value: object) -> str | None:
        raise NotImplementedError

    def message(self, name: str, value: object) -> str | None:
        """The problem with `value` after the knob's name as the user wrote it ("-k",
        "'top_p'")."""
        problem = self.problem(value)
        return None if problem is None else f"{name}: {problem}"


@dataclass(frozen=True)
class Bound(Limit):
    """The allowed range of a whole-number knob, and what is wrong with a value outside it."""

    low: int
    high: int | None
    """None: no upper end."""
    also: str = ""
    """Another allowed value besides the range, as the user writes it ("auto")."""

    def allowed(self) -> str:
        """The range as a message shows it: '0 to 16, or "auto"'."""
        span = f"{self.low} or more" if self.high is None else f"{self.low} to {self.high}"
        return span + (f', or "{self.also}"' if self.also else "")

    def problem(self, value: object) -> str | None:
        """What is wrong with `value` ("… is not a whole number (allowed: …)"), or None."""
        if self.also and value == self.also:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{value!r} is not a whole number (allowed: {self.allowed()})"
        if value < self.low or (self.high is not None and value > self.high):
            return f"{value} is out of range (allowed: {self.allowed()})"
        return None


@dataclass(frozen=True)
class RealBound(Limit):
    """The allowed range of a real-number knob: a finite number from `low` (excluded where
    `low_open`) up to `high`, and what is wrong with a value outside it (nan and inf are)."""

    low: float
    high: float | None
    low_open: bool = False
    note: str = ""
    """What the message adds after the range ("0 is greedy")."""

    def allowed(self) -> str:
        """The range as a message shows it: "above 0, up to 1", "0 or more; 0 is greedy"."""
        if self.high is None:
            span = f"above {self.low:g}" if self.low_open else f"{self.low:g} or more"
        else:
            span = (f"above {self.low:g}, up to {self.high:g}" if self.low_open
                    else f"{self.low:g} to {self.high:g}")
        return span + (f"; {self.note}" if self.note else "")

    def problem(self, value: object) -> str | None:
        """What is wrong with `value` ("nan is not a finite number (allowed: …)"), or None."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{value!r} is not a number (allowed: {self.allowed()})"
        if not math.isfinite(value):
            return f"{value} is not a finite number (allowed: {self.allowed()})"
        below = value <= self.low if self.low_open else value < self.low
        if below or (self.high is not None and value > self.high):
            return f"{value:g} is out of range (allowed: {self.allowed()})"
        return None


TEMPERATURE = RealBound(0.0, None, note="0 is greedy")
"""temperature: 0 is greedy; any finite value above samples (a huge one is near uniform)."""
TOP_P = RealBound(0.0, 1.0, low_open=True)
"""top_p: the probability mass nucleus sampling keeps; 1 keeps every token."""

K_MAX = 16
"""The most draft tokens a round may ask for: a verify of 17 tokens already costs several
plain steps on every CPU, and acceptance of a 17th draft in a row is rare even for a
same-family draft. The one maximum of k: the config file, -k, the chat's keys and palette,
k = "auto" (engine/adaptive.py) and the theory's best k all use it. (Fewer verify widths
are timed before an answer than k may reach: PRIOR_K_MAX, extended.)"""
PRIOR_K_MAX = 8
"""The longest draft whose verify is timed before an answer (the chat's baseline,
k = "auto"'s prior in `run` and `bench`, `pairs --check` for an "auto" pair; engine/costs.py
times them). Adaptive k still chooses up to K_MAX: a wider verify costs the line through the
widest timed ones, extended (`Costs.verify_seconds`). Timing every width to K_MAX + 1 would
take about three times as long (on a CPU a verify of n tokens costs about 0.6·n plain steps
beyond n = 4: widths 10..17 cost twice 1..9 together) for draft lengths that rarely win.
Here, beside K_MAX, so that the commands' option defaults (`bench sweep --ks`) need not
import the timing module."""
AUTO_K_MAX = K_MAX
"""The same maximum under the name k = "auto"'s ceiling once had (it was 8): kept so that
code importing it goes on working; new code uses K_MAX."""

DRAFT_LENGTH = Bound(0, K_MAX, also="auto")
"""k: 0 is plain decoding, "auto" adapts it every round."""
FIXED_DRAFT_LENGTH = Bound(0, K_MAX)
"""k where "auto" is no choice (the chat's keys and palette set a fixed k)."""
TOP_K = Bound(0, 1_000_000)
"""top_k: 0 keeps every token; a million is beyond every vocabulary (the largest common
one, Gemma's, has 262,144 tokens), where top-k keeps every token anyway."""
NGRAM_N = Bound(1, 16)
"""ngram_n: the longest n-gram prompt lookup matches; longer n-grams almost never recur."""
MAX_NEW_TOKENS = Bound(1, 131_072)
"""max_new_tokens: up to the longest common context window (128k tokens); an answer is
also cut where the pair's own context ends."""
