"""A long conversation costs a frame what a short one does, and looks the same.

Textual places every widget of the transcript at each layout, and a streaming answer asks
for one at each new line, so the transcript folds what lies more than a screen above the
view behind one blank widget of its height (tui/past.py). Folding moves nothing on screen
and keeps the scrollbar; scrolling towards the folded rows, a new width and showing or
hiding the ghosts (new heights) open it."""

from __future__ import annotations

from tui_support import answers, ask, make_app, ready, wait_for

from specchat.chat.scripted import FakeConfig
from specchat.tui.past import count_foldable
from specchat.tui.transcript import UserTurn

SIZE = (100, 30)
ANSWER = " ".join(f"w{i}" + ("\n\n" if i == 39 else "") for i in range(80))
"""Two paragraphs: about 12 rows an exchange beside the gauges, so 16 exchanges are 7 screens."""


def long_chat():
    return make_app({"fake": FakeConfig(name="fake", answer=ANSWER)})


def laid_out(app) -> int:
    """Widgets of the transcript the layout places (a hidden one has no region)."""
    transcript = app.chat_screen.transcript
    return sum(1 for widget in transcript.query("*") if widget.region)


def on_screen(app) -> dict:
    """Where each transcript widget in view is drawn."""
    transcript = app.chat_screen.transcript
    view = transcript.region
    return {widget: widget.region for widget in transcript.query("*")
            if widget.region and widget.region.overlaps(view)}


async def converse(pilot, count: int) -> None:
    for i in range(count):
        await ask(pilot, f"q{i}")
    await pilot.pause(0.1)


async def ten_answers(pilot):
    """The pair loaded and ten exchanges answered (about four screens); the transcript."""
    await ready(pilot)
    await converse(pilot, 10)
    return pilot.app.chat_screen.transcript


def test_only_the_leading_widgets_that_end_above_the_limit_fold():
    assert count_foldable([3, 10, 18, 30], 18) == 3
    assert count_foldable([3, 10, 18, 30], 2) == 0
    assert count_foldable([], 5) == 0


async def test_a_long_conversation_lays_out_no_more_widgets_than_a_short_one():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await converse(pilot, 4)
        short = laid_out(app)
        await converse(pilot, 12)
        assert len(answers(app)) == 16
        assert laid_out(app) < 2 * short  # without the fold: 4 times as many
        assert len(app.chat_screen.transcript.query("*")) > 3 * laid_out(app)


async def test_folding_moves_nothing_on_screen_and_keeps_the_scrollbar():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        transcript = await ten_answers(pilot)
        assert transcript.past.rows > 0
        folded = (transcript.virtual_size.height, transcript.scroll_y, on_screen(app))
        transcript.past.open()
        await pilot.pause(0.1)
        assert laid_out(app) > 3 * 10
        assert (transcript.virtual_size.height, transcript.scroll_y, on_screen(app)) == folded


async def test_scrolling_up_shows_the_first_exchange_again():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        transcript = await ten_answers(pilot)
        first = app.query(UserTurn).first()
        assert not first.region
        transcript.scroll_relative(y=-3, animate=False)  # a wheel's step: the screen above is laid out
        await pilot.pause(0.1)
        assert transcript.past.rows > 0
        transcript.scroll_home(animate=False)
        await pilot.pause(0.1)
        assert transcript.past.rows == 0
        assert first.region.overlaps(transcript.region) and "q0" in str(first.render())


async def test_a_new_width_or_ghosts_shown_open_the_fold_and_the_next_answer_folds_again():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        transcript = await ten_answers(pilot)
        await pilot.resize_terminal(SIZE[0] - 10, SIZE[1])
        await wait_for(pilot, lambda: transcript.past.rows == 0)
        await converse(pilot, 1)
        assert transcript.past.rows > 0
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: transcript.past.rows == 0)
        assert all(widget.display for widget in transcript.children)


async def test_presentation_mode_opens_the_fold_even_where_the_width_stays():
    app = long_chat()
    async with app.run_test(size=(90, 40)) as pilot:  # narrow: the gauges go under the transcript
        transcript = await ten_answers(pilot)
        assert transcript.past.rows > 0
        await pilot.press("f6")
        await wait_for(pilot, lambda: transcript.past.rows == 0)


async def test_a_reopened_long_conversation_folds_where_nothing_moves():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        await ten_answers(pilot)
        await pilot.press("ctrl+n")
        await pilot.press("f4")
        await wait_for(pilot, lambda: app.screen.query("#history-list"))
        await pilot.press("enter")
        transcript = app.chat_screen.transcript
        await wait_for(pilot, lambda: len(answers(app)) == 10 and transcript.past.rows > 0)
        await pilot.pause(0.1)
        folded = (transcript.virtual_size.height, on_screen(app))
        transcript.past.open()
        await pilot.pause(0.1)
        assert (transcript.virtual_size.height, on_screen(app)) == folded


async def test_page_keys_scroll_the_conversation_while_the_message_keeps_the_focus():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        transcript, box = await ten_answers(pilot), app.chat_screen.message_box
        await pilot.press(*"draft")
        bottom = transcript.scroll_y
        await pilot.press("pageup")
        await pilot.pause(0.2)
        assert transcript.scroll_y < bottom and app.focused is box
        for _ in range(20):
            await pilot.press("pageup")
        await wait_for(pilot, lambda: transcript.scroll_y == 0)
        first = app.query(UserTurn).first()
        assert first.region.overlaps(transcript.region)  # the fold opened on the way up
        for _ in range(20):
            await pilot.press("pagedown")
        await wait_for(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y)
        await ask(pilot, "!")  # at its end it follows the new answer again
        await pilot.pause(0.2)
        assert transcript.scroll_y == transcript.max_scroll_y and box.text == ""
        saved = [turn.text for turn in app.service.turns() if turn.role == "user"]
        assert saved[-1] == "draft!"


async def test_where_the_conversation_fits_the_page_keys_stay_the_message_box_s():
    app = long_chat()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        box = app.chat_screen.message_box
        await pilot.press("a", "ctrl+j", "b", "ctrl+j", "c")
        assert box.cursor_location[0] == 2
        await pilot.press("pageup")
        await pilot.pause(0.1)
        assert box.cursor_location[0] == 0
