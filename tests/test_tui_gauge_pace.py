"""The gauges redraw at their own pace (`GAUGE_FRAME_S`) while an answer streams, not with
every batch of rounds; an answer's last figures and a paced round's are drawn at once."""

from __future__ import annotations

import time

from specchat.chat.events import RoundUpdate, StatsSnapshot
from specchat.tui import gauges
from specchat.tui.gauges import GAUGE_FRAME_S, Gauges
from specchat.tui.messages import StatsUpdated
from specchat.tui.worker import AnswerJob, Pacing, RoundBatch
from tui_support import ask, make_app, ready, streaming, wait_for

SIZE = (120, 40)


def count_draws(monkeypatch) -> list[int]:
    """Record the token count of every figures drawn (each call of `watch_stats`)."""
    drawn: list[int] = []
    watch = Gauges.watch_stats

    def counted(self, stats):
        drawn.append(-1 if stats is None else stats.tokens)
        watch(self, stats)

    monkeypatch.setattr(Gauges, "watch_stats", counted)
    return drawn


def tokens_shown(app) -> str:
    return str(app.gauges.query_one("#g-timing").render())


async def answered(pilot) -> int:
    """Ask once and wait for the answer's end; the job id the gauges now follow."""
    await ready(pilot)
    await ask(pilot)
    await wait_for(pilot, lambda: not streaming(pilot.app))
    return pilot.app.gauges.job_id


async def test_a_stream_of_figures_redraws_the_gauges_at_their_pace(monkeypatch):
    drawn = count_draws(monkeypatch)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        job = await answered(pilot)
        before = len(drawn)
        started = time.monotonic()
        for tokens in range(101, 113):  # a batch a frame, as tui/worker.py posts them
            app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=tokens, rounds=tokens)))
            await pilot.pause()
        elapsed = time.monotonic() - started
        await wait_for(pilot, lambda: "tokens 112 " in tokens_shown(app))
        redraws = drawn[before:]
        assert redraws[-1] == 112
        assert len(redraws) <= 2 + elapsed / GAUGE_FRAME_S, (redraws, elapsed)


async def test_an_answers_last_figures_are_drawn_at_once(monkeypatch):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        job = await answered(pilot)
        await pilot.pause(GAUGE_FRAME_S * 3)  # the answer's end (its last sparkline too) was drawn a moment ago
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=50, rounds=20)))
        await pilot.pause()
        assert "tokens 50 " in tokens_shown(app)  # the first after a quiet spell: at once
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=51, rounds=21), at_once=True))
        await pilot.pause()
        assert "tokens 51 " in tokens_shown(app)


async def test_figures_of_an_answer_no_longer_followed_are_not_drawn(monkeypatch):
    monkeypatch.setattr(gauges, "GAUGE_FRAME_S", 1.0)  # a wait no loaded machine outlasts
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        job = await answered(pilot)
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=70, rounds=30), at_once=True))
        await pilot.pause()
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=71, rounds=31)))
        await pilot.pause()
        assert "tokens 70 " in tokens_shown(app)  # 71 waits for the gauges' pace
        app.gauges.start_job(job + 1)  # the next answer starts before the figures' turn
        await pilot.pause(1.5)
        assert "tokens 71 " not in tokens_shown(app)


class Collect:
    """A stand-in for the app and the gauges: keeps what the worker posts."""

    def __init__(self):
        self.messages: list = []

    def post_message(self, message) -> bool:
        self.messages.append(message)
        return True


def posted_stats(pacing: Pacing) -> list[StatsUpdated]:
    gauges = Collect()
    batch = RoundBatch(AnswerJob(1, None, pacing), Collect(), gauges)  # type: ignore[arg-type]
    for rounds in range(1, 4):
        batch.add(RoundUpdate(accepted=(), rejected=(), token=None, draft_ms=1.0, verify_ms=2.0,
                              stats=StatsSnapshot(rounds=rounds)))
    batch.post()
    return [m for m in gauges.messages if isinstance(m, StatsUpdated)]


def test_a_paced_round_is_drawn_at_once_and_a_free_run_at_the_gauges_pace():
    paced = posted_stats(Pacing(slow_ms=300))
    assert [m.stats.rounds for m in paced] == [1, 2, 3] and all(m.at_once for m in paced)
    free = posted_stats(Pacing())
    assert free and not any(m.at_once for m in free)
