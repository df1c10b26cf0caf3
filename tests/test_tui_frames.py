"""The screen is updated no more often than a streaming answer needs, so that on 2 cores the
drawing leaves the model its CPU: a new row of text costs one whole-screen layout, not two;
the gauges redraw in the same screen update as a batch of tokens, not in one of their own;
and the chunk still growing is wrapped once per batch for its height and once to draw it,
while what it draws always follows its spans, its pending drafts, the ghost toggle and the
theme."""

from __future__ import annotations

from textual.content import Content
from textual.screen import Screen

from specchat.chat.events import StatsSnapshot, TokenSpan
from specchat.chat.scripted import FakeConfig
from specchat.tui import gauges
from specchat.tui.gauges import GAUGE_FRAME_S, Gauges
from specchat.tui.messages import StatsUpdated
from specchat.tui.transcript import TokenText, takes_layout
from tui_support import ask, last_answer, make_app, ready, wait_for

SIZE = (120, 40)
LINES = 16
ANSWER = "".join(f"line {i} of the answer\n" for i in range(LINES))
"""Short lines: each is one row, and a batch of rounds at 40 tokens/s adds at most one."""


def count_calls(monkeypatch, owner, name: str) -> list[int]:
    """Count every call of `owner.name` (one element per call)."""
    calls: list[int] = []
    original = getattr(owner, name)

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


async def test_each_new_row_of_a_streaming_answer_costs_one_layout(monkeypatch):
    app = make_app({"lines": FakeConfig(name="lines", answer=ANSWER, tokens_per_s=40)},
                   first="lines")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        layouts = count_calls(monkeypatch, Screen, "_refresh_layout")
        await ask(pilot, "lines please")
        flow = last_answer(app).tokens
        assert flow.plain_text() == ANSWER
        rows = flow.size.height
        assert rows >= LINES  # every line was laid out: the layouts were not skipped
        # beside one a row: the question and the answer appearing, the answer's end
        assert len(layouts) <= rows + 3, (len(layouts), rows)


def test_a_textual_whose_size_hook_lost_its_layout_argument_is_left_as_it_is():
    def without_layout(self, size, virtual_size, container_size) -> bool:
        return True

    def with_layout(self, size, virtual_size, container_size, layout=True) -> bool:
        return True

    assert not takes_layout(without_layout)
    assert takes_layout(with_layout)


async def test_the_gauges_redraw_with_a_batch_of_rounds_not_in_an_update_of_their_own(
        monkeypatch):
    monkeypatch.setattr(gauges, "FRAME_S", 1.0)  # a late timer no loaded machine outlasts
    timed_draws = count_calls(monkeypatch, Gauges, "_on_due")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        job = app.gauges.job_id
        shown: list[str] = []
        for tokens in range(100, 130):  # batches every 0.05 s for 1.5 s, faster than the pace
            app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=tokens, rounds=tokens)))
            await pilot.pause(0.05)
            shown.append(str(app.gauges.query_one("#g-timing").render()))
        drawn = {line.split("tokens ")[1].split()[0] for line in shown}
        assert len(drawn) >= 3, drawn  # the panel kept up with the stream
        assert timed_draws == []  # every redraw came with a batch


async def test_figures_no_batch_follows_are_drawn_one_batch_after_the_pace(monkeypatch):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        job = app.gauges.job_id
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=60, rounds=20), at_once=True))
        await pilot.pause()
        app.gauges.post_message(StatsUpdated(job, StatsSnapshot(tokens=61, rounds=21)))
        await pilot.pause()
        timing = app.gauges.query_one("#g-timing")
        assert "tokens 60 " in str(timing.render())  # 61 waits for the gauges' pace
        await wait_for(pilot, lambda: "tokens 61 " in str(timing.render()),
                       timeout=GAUGE_FRAME_S + gauges.FRAME_S + 2)


def words(start: int, count: int, kind: str = "accepted") -> list[TokenSpan]:
    return [TokenSpan(f" w{i}", kind, i) for i in range(start, start + count)]


async def test_a_growing_chunk_is_wrapped_twice_a_batch_even_when_it_gains_a_row(monkeypatch):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        chunk = last_answer(app).tokens.chunks[-1]
        wraps = count_calls(monkeypatch, Content, "_wrap_and_format")
        for batch in range(6):  # 30 words a batch: a new row each time
            rows = chunk.size.height
            before = len(wraps)
            chunk.append(words(100 + 30 * batch, 30))
            await pilot.pause()
            await pilot.pause()
            assert chunk.size.height > rows
            assert len(wraps) - before <= 2, batch


def shown_text(chunk: TokenText) -> str:
    return chunk.content().plain


def colour_of(chunk: TokenText, text: str) -> str:
    content = chunk.content()
    start = content.plain.index(text)
    (span,) = [s for s in content.spans if s.start == start]
    return span.style.foreground.hex.lower()


async def test_what_a_chunk_draws_follows_its_spans_drafts_ghosts_and_theme():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot)
        chunk = last_answer(app).tokens.chunks[-1]
        text = shown_text(chunk)
        chunk.append([TokenSpan(" kept", "accepted", 0), TokenSpan(" gone", "rejected", 1)],
                     pending=(TokenSpan(" maybe", "pending", 2),))
        await pilot.pause()
        assert shown_text(chunk) == text + " kept gone maybe"
        chunk.resolve_pending()
        assert shown_text(chunk) == text + " kept gone"
        chunk.show_ghosts = False
        await pilot.pause()
        assert shown_text(chunk) == text.replace(" ghost", "").replace(" nope never", "") + " kept"
        chunk.show_ghosts = True
        await pilot.pause()
        chunk.append([TokenSpan(" end\n", "accepted", 3)])
        assert shown_text(chunk) == text + " kept gone end\n"
        chunk.end_chunk()  # the next chunk's own row is the line break
        assert shown_text(chunk) == text + " kept gone end"
        old = colour_of(chunk, " kept")
        app.theme = "specchat-light" if app.theme != "specchat-light" else "specchat-dark"
        await pilot.pause()
        new = colour_of(chunk, " kept")
        assert new != old
        assert new == app.theme_variables["spec-accepted"].lower()
