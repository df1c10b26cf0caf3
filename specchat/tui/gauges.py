"""The gauges panel: tokens/s in large digits, acceptance, τ, per-position
acceptance bars, a sparkline of tokens per round, TTFT, k, temperature, device,
dtype, memory, the speedup over target-only decoding at the same context lengths
and sampling settings (chat/baseline.py), and the theory beside it (α from the
acceptance events, ideal speedup at the costs of timed forwards).

Stats arrive as `StatsUpdated` messages posted straight to this widget (so that
they coalesce), land in the `stats` reactive, and `watch_stats` redraws. While an answer
streams the panel redraws at most every `GAUGE_FRAME_S`, behind the tokens' own pace and
with one of their batches, so both share a screen update.
"""

from __future__ import annotations

import time
from collections import deque

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Digits, Sparkline, Static

from specchat.chat.baseline import (Baseline, SamplingParams, decode_span, gauge_speedup,
                                    theory_for, too_short)
from specchat.chat.events import StatsSnapshot
from specchat.chat.service import PairInfo
from specchat.sizes import size_text
from specchat.tui.messages import StatsUpdated
from specchat.tui.worker import FRAME_S

SPARK_ROUNDS = 60
BAR_WIDTH = 12
GAUGE_FRAME_S = 0.25
"""While an answer streams, the figures and the sparkline redraw at most this often (the
tokens, at most every `tui.worker.FRAME_S`). On 2 cores the screen's drawing takes CPU from
the model's two threads; redrawing the panel with every batch of rounds took a third of
the UI thread's time. An answer's last figures, and a paced round's, are drawn at once."""


def fmt(value: float | None, spec: str = ".1f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def theory_line(stats: StatsSnapshot | None, baseline: Baseline | None) -> str:
    """α from the acceptance events, the ideal speedup of the k in use and the best k, at
    the draft and verify costs of timed forwards (chat/baseline.py): never from this
    answer's speed."""
    if stats is None or not stats.drafting_rounds or stats.alpha is None:
        if baseline is not None and baseline.no_k_pays():
            return (f"theory: no k pays here even if every draft were accepted "
                    f"(draft step c {baseline.c:.2f}, verify of 2 v {baseline.v(2):.2f} steps)")
        return "theory: – (no drafting yet)"
    theory = theory_for(stats, baseline)
    if theory is None:
        return f"theory: α {stats.alpha:.2f} (accepted / tested drafts); costs not measured yet"
    return (f"theory: α {theory.alpha:.2f} → k {theory.k}: ideal {theory.ideal:.2f}× "
            f"(c {theory.c:.2f}, v({theory.k + 1}) {theory.v:.2f}); "
            f"best k {theory.best_k}: {theory.best:.2f}×")


def _sampling_text(sampling: SamplingParams) -> str:
    temperature, top_k, top_p = sampling.temperature, sampling.top_k, sampling.top_p
    extra = (f", top-k {top_k}" if top_k else "") + (f", top-p {top_p:g}" if top_p < 1 else "")
    return f"T={temperature:g}{extra}"


def baseline_text(baseline: Baseline, stats: StatsSnapshot | None = None) -> str:
    """How the baseline was obtained and when."""
    when = time.strftime("%H:%M:%S", time.localtime(baseline.measured_at))
    lengths = [length for length, _ in baseline.step_points]
    reach = f"{min(lengths)}–{max(lengths)}"
    if stats is not None and decode_span(stats)[1] > baseline.max_context * 1.25:
        reach += ", extrapolated beyond"
    passes = f", {baseline.passes} passes" if baseline.passes > 1 else ""
    return (f"target-only at the same context lengths, {_sampling_text(baseline.sampling)}; "
            f"cost curve {reach} tokens measured {when}{passes}")


TPS_LABEL = "tokens/s · decode, this answer"
"""Under the big tokens/s digits, or after the figure on one line where the panel is short
(a narrow terminal puts it under the conversation)."""
NO_PAIR = "speedup: – (no pair loaded)"
"""While no pair is loaded (loading, or its load failed): nothing measures the baseline."""


def speedup_value(stats: StatsSnapshot | None, baseline: Baseline | None, mode: str) -> float | None:
    """The gauge's speedup, or None where it has no meaning (target-only runs, a race)."""
    return gauge_speedup(stats, baseline) if mode == "speculative" else None


def speedup_line(stats: StatsSnapshot | None, baseline: Baseline | None, mode: str,
                 sampling: SamplingParams | None, value: float | None) -> str:
    """The speedup (`value`, from `speedup_value`) and what it is measured against; what the
    run is where none applies."""
    if mode == "race":
        return "race: target only — this run is the baseline (no speedup)"
    if mode == "target-only":
        return "speculation off: target only (no speedup)"
    if baseline is None:
        wanted = "" if sampling is None else f" at {_sampling_text(sampling)}"
        return f"speedup: – (measuring target-only speed{wanted} when idle…)"
    if stats is not None and stats.decode_tokens and too_short(stats, baseline):
        return (f"speedup: – (too short to measure: {stats.decode_s:.1f} s of decoding, "
                f"{baseline.min_decode_s:g} s needed; {baseline_text(baseline, stats)})")
    shown = "–" if value is None else f"{value:.2f}×"
    load = baseline.load_factor(stats)
    load_text = "" if load is None else f"; load now ×{load:.2f} of idle, charged to both"
    return f"speedup: {shown} ({baseline_text(baseline, stats)}{load_text})"


def headline(tokens_per_s: float | None, mode: str, value: float | None) -> str:
    """The narrow panel's first line: this answer's tokens/s and the speedup beside it, so
    that a terminal of 24 rows, whose panel under the conversation shows 6, still shows
    both (the speedup's own line, with what it is measured against, is further down)."""
    if mode == "race":
        beside = "race: the target-only baseline"
    elif mode == "target-only":
        beside = "speculation off"
    else:
        beside = "speedup " + ("–" if value is None else f"{value:.2f}×")
    return f"{fmt(tokens_per_s)} {TPS_LABEL} · {beside}"


def _height(text: str, width: int) -> int:
    """Rows a plain text takes at this width (wrapping long lines), an upper bound."""
    width = max(width, 1)
    return sum(max(1, -(-len(line) // width)) for line in text.split("\n"))


class Gauges(VerticalScroll):
    """Live figures for the answer being generated (or the last one)."""

    stats: reactive[StatsSnapshot | None] = reactive(None, always_update=True)
    info: reactive[PairInfo | None] = reactive(None)
    baseline: reactive[Baseline | None] = reactive(None)
    """The target-only baseline for the current answer's sampling settings."""
    mode: reactive[str] = reactive("speculative")
    """What the current (or last) run is: "speculative", "target-only" or "race"."""
    sampling: reactive[SamplingParams | None] = reactive(None)
    k: reactive[int] = reactive(4)
    k_auto: reactive[bool] = reactive(False)
    temperature: reactive[float] = reactive(0.0)
    speculate: reactive[bool] = reactive(True)
    status: reactive[str] = reactive("starting…")
    pacing: reactive[str] = reactive("")
    """"step mode", "slow motion 300 ms", both or nothing."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.job_id = -1
        self.per_round: deque[float] = deque(maxlen=SPARK_ROUNDS)
        self._waiting: StatsSnapshot | None = None
        """The latest figures not drawn yet (`GAUGE_FRAME_S`)."""
        self._drawn_at = float("-inf")
        self._due: Timer | None = None
        self._drawn = False
        self._shown: dict[str, str] = {}
        """What each child shows now: an unchanged value is not drawn again."""

    def compose(self) -> ComposeResult:
        yield Static("", id="g-status", markup=False)
        yield Static("", id="g-tps-line", classes="narrow-only", markup=False)
        yield Digits("-", id="g-tps")
        yield Static(TPS_LABEL, id="g-tps-label")
        yield Digits("-", id="g-speedup-big", classes="presentation-only")
        yield Static("", id="g-acceptance", markup=False)
        yield Static("", id="g-positions", markup=False)
        yield Static("tokens per round", classes="g-caption")
        yield Sparkline([], id="g-spark")
        yield Static("", id="g-timing", markup=False)
        yield Static("", id="g-speedup", markup=False)
        yield Static("", id="g-theory", markup=False)
        yield Static("", id="g-controls", markup=False)
        yield Static("", id="g-pair", markup=False)

    def on_mount(self) -> None:
        self._drawn = True
        self.watch_stats(None)
        self._show_controls()
        self._show_pair()
        self.watch_status(self.status)

    def _put(self, selector: str, value: str) -> None:
        """Show a value in a child (Static or Digits); a no-op while the app shuts down.
        Unchanged values are skipped, and a new layout is asked for only when the value's
        height may change (a layout refresh redraws the whole screen)."""
        before = self._shown.get(selector)
        if value == before:
            return
        try:
            child = self.query_one(selector)
        except NoMatches:
            return
        self._shown[selector] = value
        if isinstance(child, Static):
            width = child.content_size.width
            child.update(value, layout=before is None or _height(before, width) != _height(value, width))
        elif isinstance(child, Digits):
            child.update(value)

    def start_job(self, job_id: int) -> None:
        """A new answer: forget the previous one's rounds."""
        self.job_id = job_id
        self.per_round.clear()
        self._waiting = None
        self._draw_spark()

    def forget_answer(self) -> None:
        """Another pair answers from now: the last answer's figures were the old pair's."""
        self.start_job(-1)
        self.mode = "speculative"
        self.stats = None

    def push_rounds(self, committed: list[int]) -> None:
        """Record rounds' committed tokens (a batch: tui/worker.py sends at most one per
        frame); the sparkline shows them at the panel's next redraw."""
        self.per_round.extend(committed)
        self._redraw_soon()

    def _draw_spark(self) -> None:
        for spark in self.query("#g-spark").results(Sparkline):
            spark.data = list(self.per_round)

    def on_stats_updated(self, message: StatsUpdated) -> None:
        if message.job_id == self.job_id:
            self._waiting = message.stats
            self._redraw_soon(message.at_once)

    def _redraw_soon(self, at_once: bool = False) -> None:
        """Draw what is waiting now if asked to, or if the panel was last drawn at least
        `GAUGE_FRAME_S` ago: with the batch of rounds that brought it, so the panel and the
        tokens share a screen update. Figures that no batch follows in time are drawn by a
        timer one batch later (`FRAME_S`)."""
        wait = self._drawn_at + GAUGE_FRAME_S - time.monotonic()
        if at_once or wait <= 0:
            self._draw_waiting()
        elif self._due is None:
            self._due = self.set_timer(wait + FRAME_S, self._on_due)

    def _on_due(self) -> None:
        self._due = None
        self._draw_waiting()

    def _draw_waiting(self) -> None:
        if self._due is not None:  # drawn before its time: the pending timer has nothing left
            self._due.stop()
            self._due = None
        self._drawn_at = time.monotonic()
        self._draw_spark()  # unchanged rounds leave the sparkline's data equal: no redraw
        if self._waiting is not None:
            stats, self._waiting = self._waiting, None
            self.stats = stats

    def watch_stats(self, stats: StatsSnapshot | None) -> None:
        shown = stats or StatsSnapshot()
        self._put("#g-tps", fmt(shown.tokens_per_s).replace("–", "-"))
        rate_pct = None if shown.acceptance_rate is None else shown.acceptance_rate * 100
        self._put("#g-acceptance", f"acceptance {fmt(rate_pct, '.1f', '%')} ({shown.accepted}/"
                                   f"{shown.drafted})   τ {fmt(shown.mean_acceptance_length, '.2f')}")
        self._put("#g-positions", self._positions(shown))
        ttft = None if shown.ttft_s is None else shown.ttft_s * 1000
        self._put("#g-timing", f"TTFT {fmt(ttft, '.0f', ' ms')}   tokens {shown.tokens}   "
                               f"rounds {shown.rounds}\nlast 16 rounds "
                               f"{fmt(shown.live_tokens_per_s, '.1f', ' tok/s')}")
        self._show_speedup()
        self._put("#g-theory", theory_line(stats, self.baseline))
        self._show_controls()

    def _positions(self, stats: StatsSnapshot) -> str:
        if not stats.per_position_acceptance:
            return "per position: –"
        return "\n".join(f"pos {i + 1} {bar(v)} {v:.2f}"
                         for i, v in enumerate(stats.per_position_acceptance))

    def _show_speedup(self) -> None:
        value = self.speedup()
        self._put("#g-speedup", NO_PAIR if self.info is None else speedup_line(
            self.stats, self.baseline, self.mode, self.sampling, value))
        self._put("#g-speedup-big", "-" if value is None else f"{value:.2f}x")
        self._put("#g-tps-line", headline(None if self.stats is None else self.stats.tokens_per_s,
                                          self.mode, value))

    def speedup(self) -> float | None:
        """The speedup the gauge shows now (None where it shows none)."""
        return speedup_value(self.stats, self.baseline, self.mode)

    def watch_baseline(self) -> None:
        if self._drawn:
            self.watch_stats(self.stats)

    def watch_mode(self) -> None:
        if self._drawn:
            self.watch_stats(self.stats)

    def watch_status(self, status: str) -> None:
        if self._drawn:
            self._put("#g-status", status)

    def watch_k(self) -> None:
        self._show_controls()

    def watch_temperature(self) -> None:
        self._show_controls()

    def watch_speculate(self) -> None:
        self._show_controls()

    def watch_pacing(self) -> None:
        self._show_controls()

    def watch_info(self) -> None:
        self._show_pair()
        if self._drawn:
            self._show_speedup()

    def _show_controls(self) -> None:
        if not self._drawn:
            return
        mode = "speculation ON" if self.speculate else "speculation OFF (target only)"
        pacing = f"\n{self.pacing} (pauses excluded from every rate)" if self.pacing else ""
        self._put("#g-controls", f"{self._k_text()}   temperature {self.temperature:.2f}\n"
                                 f"{mode}{pacing}")

    def _k_text(self) -> str:
        if not self.k_auto:
            return f"k {self.k}"
        now = self.stats.k if self.stats is not None and self.stats.rounds else None
        return "k auto" + ("" if now is None else f" (last round {now})")

    def watch_k_auto(self) -> None:
        self._show_controls()

    def _show_pair(self) -> None:
        if not self._drawn:
            return
        info = self.info
        text = "pair: loading…" if info is None else (
            f"pair {info.name}\n{info.device} · {info.dtype} · "
            f"weights {size_text(info.memory_bytes)}"
            + (f"\n{info.engines}" if info.engines else "")
            + ("" if info.seed is None else f"\nseed {info.seed}"))
        self._put("#g-pair", text)
