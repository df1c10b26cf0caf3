"""The gauges panel: tokens/s in large digits, acceptance, τ, per-position
acceptance bars, a sparkline of tokens per round, TTFT, k, temperature, device,
dtype, memory, the measured speedup over the target-only calibration, and the
theory beside it (α inferred from τ, ideal speedup at the measured costs).

Stats arrive as `StatsUpdated` messages posted straight to this widget (so that
they coalesce), land in the `stats` reactive, and `watch_stats` redraws.
"""

from __future__ import annotations

import time
from collections import deque

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widgets import Digits, Sparkline, Static

from specchat.chat.events import StatsSnapshot
from specchat.theory import alpha_from_tau, ideal_speedup
from specchat.tui.backend import Calibration, PairInfo
from specchat.tui.messages import StatsUpdated

SPARK_ROUNDS = 60
SPARK_INTERVAL_S = 0.05
BAR_WIDTH = 12


def fmt(value: float | None, spec: str = ".1f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def fmt_bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def theory_line(stats: StatsSnapshot, calibration: Calibration | None) -> str:
    """α inferred from τ, and the ideal speedup at the measured draft and verify costs."""
    tau, k = stats.mean_acceptance_length, stats.k
    if tau is None or k <= 0 or not stats.drafted:
        return "theory: – (no drafting yet)"
    alpha = alpha_from_tau(tau, k)
    if calibration is None or not stats.rounds:
        return f"theory: α≈{alpha:.2f} from τ"
    cost = (stats.draft_s / stats.drafted) / calibration.step_s
    verify = (stats.verify_s / stats.rounds) / calibration.step_s
    ideal = ideal_speedup(alpha, k, cost, verify)
    return f"theory: α≈{alpha:.2f} from τ → ideal {ideal:.2f}× (c={cost:.2f}, v={verify:.2f})"


def speedup_line(stats: StatsSnapshot | None, calibration: Calibration | None) -> str:
    if calibration is None:
        return "speedup: – (calibrating target-only…)"
    when = time.strftime("%H:%M:%S", time.localtime(calibration.measured_at))
    base = f"target-only {calibration.tokens_per_s:.1f} tok/s, measured {when}"
    if stats is None or not stats.tokens_per_s:
        return f"speedup: – ({base})"
    return f"speedup: {stats.tokens_per_s / calibration.tokens_per_s:.2f}× ({base})"


class Gauges(VerticalScroll):
    """Live figures for the answer being generated (or the last one)."""

    stats: reactive[StatsSnapshot | None] = reactive(None, always_update=True)
    info: reactive[PairInfo | None] = reactive(None)
    calibration: reactive[Calibration | None] = reactive(None)
    k: reactive[int] = reactive(4)
    temperature: reactive[float] = reactive(0.0)
    speculate: reactive[bool] = reactive(True)
    status: reactive[str] = reactive("starting…")
    pacing: reactive[str] = reactive("")
    """"step mode", "slow motion 300 ms", both or nothing."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.job_id = -1
        self.per_round: deque[float] = deque(maxlen=SPARK_ROUNDS)
        self._spark_due = False
        self._drawn = False

    def compose(self) -> ComposeResult:
        yield Static("", id="g-status", markup=False)
        yield Digits("-", id="g-tps")
        yield Static("tokens/s", id="g-tps-label")
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

    def _put(self, selector: str, value) -> None:
        """Show a value in a child (Static or Digits); a no-op while the app shuts down."""
        try:
            self.query_one(selector).update(value)
        except NoMatches:
            pass

    def start_job(self, job_id: int) -> None:
        """A new answer: forget the previous one's rounds."""
        self.job_id = job_id
        self.per_round.clear()
        for spark in self.query("#g-spark").results(Sparkline):
            spark.data = []

    def push_round(self, committed: int) -> None:
        """Record a round's committed tokens; the sparkline redraws at most 20 times a second."""
        self.per_round.append(committed)
        if not self._spark_due:
            self._spark_due = True
            self.set_timer(SPARK_INTERVAL_S, self._draw_spark)

    def _draw_spark(self) -> None:
        self._spark_due = False
        for spark in self.query("#g-spark").results(Sparkline):
            spark.data = list(self.per_round)

    def on_stats_updated(self, message: StatsUpdated) -> None:
        if message.job_id == self.job_id:
            self.stats = message.stats

    def watch_stats(self, stats: StatsSnapshot | None) -> None:
        shown = stats or StatsSnapshot()
        rate = shown.live_tokens_per_s or shown.tokens_per_s
        self._put("#g-tps", fmt(rate).replace("–", "-"))
        rate_pct = None if shown.acceptance_rate is None else shown.acceptance_rate * 100
        self._put("#g-acceptance", f"acceptance {fmt(rate_pct, '.1f', '%')} ({shown.accepted}/"
                                   f"{shown.drafted})   τ {fmt(shown.mean_acceptance_length, '.2f')}")
        self._put("#g-positions", self._positions(shown))
        ttft = None if shown.ttft_s is None else shown.ttft_s * 1000
        self._put("#g-timing", f"TTFT {fmt(ttft, '.0f', ' ms')}   tokens {shown.tokens}   "
                               f"rounds {shown.rounds}")
        self._show_speedup()
        self._put("#g-theory", theory_line(shown, self.calibration))

    def _positions(self, stats: StatsSnapshot) -> str:
        if not stats.per_position_acceptance:
            return "per position: –"
        return "\n".join(f"pos {i + 1} {bar(v)} {v:.2f}"
                         for i, v in enumerate(stats.per_position_acceptance))

    def _show_speedup(self) -> None:
        line = speedup_line(self.stats, self.calibration)
        self._put("#g-speedup", line)
        big = "-"
        if self.stats and self.stats.tokens_per_s and self.calibration:
            big = f"{self.stats.tokens_per_s / self.calibration.tokens_per_s:.2f}x"
        self._put("#g-speedup-big", big)

    def watch_calibration(self) -> None:
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

    def _show_controls(self) -> None:
        if not self._drawn:
            return
        mode = "speculation ON" if self.speculate else "speculation OFF (target only)"
        pacing = f"\n{self.pacing} (timings include the pauses)" if self.pacing else ""
        self._put("#g-controls", f"k {self.k}   temperature {self.temperature:.2f}\n{mode}{pacing}")

    def _show_pair(self) -> None:
        if not self._drawn:
            return
        info = self.info
        text = "pair: loading…" if info is None else (
            f"pair {info.name}\n{info.device} · {info.dtype} · weights {fmt_bytes(info.memory_bytes)}")
        self._put("#g-pair", text)
