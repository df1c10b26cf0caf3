"""The transcript shows an answer's lines as its text has them, and cheaply.

A long answer streamed fast is drawn in paragraph-sized chunks, so a frame re-wraps only the
chunk still growing: rounds reach the UI in batches of up to a frame's worth (a GPU pair's
hundreds of tokens), so a chunk must end inside a batch, not only at its end. The chunks
stack, so a chunk may end only where the text has a newline, never at a rejected draft's;
and a shown ghost's newline is a mark, not a line break."""

from __future__ import annotations

from tui_support import ask, last_answer, make_app, ready

from specchat.chat.events import TokenSpan
from specchat.chat.scripted import FakeConfig, words
from specchat.tui.transcript import CHUNK_SPANS, TokenFlow

SIZE = (150, 45)
PARAGRAPH_WORDS = 40


def long_answer(words: int) -> str:
    """Word tokens in paragraphs of PARAGRAPH_WORDS words, as ui_bench streams."""
    return " ".join(f"w{i}" + ("\n\n" if i % PARAGRAPH_WORDS == PARAGRAPH_WORDS - 1 else "")
                    for i in range(words))


def line_end(span: TokenSpan) -> bool:
    """A newline the text has: a rejected draft's is not in it."""
    return span.kind != "rejected" and span.text.endswith("\n")


def assert_paragraph_chunks(flow: TokenFlow) -> None:
    """Every chunk but the last ended at the first line end of the text once it was full
    (the chunks stack, so a break anywhere else would show a line break the text lacks)."""
    for chunk in flow.chunks[:-1]:
        assert chunk.chunk_ended and line_end(chunk.spans[-1])
        assert CHUNK_SPANS <= len(chunk.spans)
        ends = [i for i, span in enumerate(chunk.spans) if line_end(span)]
        assert [i for i in ends if i >= CHUNK_SPANS - 1] == [len(chunk.spans) - 1]
    assert not flow.chunks[-1].chunk_ended


async def test_a_long_answer_streamed_in_big_batches_is_cut_into_paragraph_chunks():
    text = long_answer(3000)
    app = make_app({"fast": FakeConfig(name="fast", answer=text)}, first="fast")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await ask(pilot, "stream please")
        flow = last_answer(app).tokens
        assert flow.plain_text() == text
        assert len(flow.chunks) >= 3000 // (CHUNK_SPANS + 2 * PARAGRAPH_WORDS)
        assert_paragraph_chunks(flow)


def test_a_saved_answer_is_cut_where_the_stream_would_cut_it():
    spans = [TokenSpan(word, "target", i) for i, word in enumerate(words(long_answer(1500)))]
    flow = TokenFlow(spans)
    assert [s for chunk in flow.chunks for s in chunk.spans] == spans
    assert len(flow.chunks) > 2
    assert_paragraph_chunks(flow)


def test_a_chunk_never_ends_at_a_rejected_drafts_newline():
    spans = []
    for i, word in enumerate(words(long_answer(1500))):
        spans.append(TokenSpan(word, "accepted", i))
        if i % 7 == 6:  # the draft guessed the line ended here; the target went on
            spans.append(TokenSpan(".\n", "rejected", -1))
    flow = TokenFlow(spans)
    assert len(flow.chunks) > 2
    assert_paragraph_chunks(flow)


async def test_a_shown_ghosts_newline_is_a_mark_not_a_line_break():
    spans = [TokenSpan("Use all", "accepted", 1), TokenSpan(".\n", "rejected", 2),
             TokenSpan(" are true.", "resampled", 3)]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        flow = TokenFlow(spans)
        await app.mount(flow)
        assert flow.drawn_text() == "Use all.↵ are true."
        assert flow.plain_text() == "Use all are true."
