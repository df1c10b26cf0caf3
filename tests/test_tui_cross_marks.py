"""The chat shows a cross-tokenizer draft honestly: fates stay on the target's tokens, a
token that is not exactly one of the draft's own tokens is underlined (its colour is still
its fate's, from the theme), and the legend names the mark where the pair has such a draft."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App

from specchat.chat.events import TokenSpan
from specchat.chat.service import PairInfo
from specchat.tui.chat_screen import Legend
from specchat.tui.transcript import UNALIGNED_LABEL, TokenText, token_styles

SPANS = [TokenSpan("Hel", "accepted", 1, alignment="split"),
         TokenSpan("lo", "accepted", 2, alignment="one"),
         TokenSpan(" world", "rejected", 3, alignment="merged"),
         TokenSpan(" there", "resampled", 4)]


@dataclass
class Pacing:
    step: bool = False


def info(cross: bool) -> PairInfo:
    return PairInfo("x", "cpu", "int8", 0, True, 4, 0.0, 2048, cross_tokenizer=cross)


class Host(App):
    def __init__(self, cross: bool):
        super().__init__()
        self.info = info(cross)

    def compose(self):
        yield TokenText(SPANS)
        yield Legend(Pacing(), id="legend")


async def test_an_unaligned_token_is_underlined_in_its_fates_colour():
    app = Host(cross=True)
    async with app.run_test():
        content = app.query_one(TokenText).content()
        styles = token_styles(app.theme_variables)
        by_text = {content.plain[s.start:s.end]: s.style for s in content.spans}
        assert by_text["Hel"].underline and by_text[" world"].underline
        assert not by_text["lo"].underline and not by_text[" there"].underline
        assert by_text["Hel"].foreground == styles["accepted"].foreground
        assert by_text[" world"].strike  # a ghost stays a ghost


async def test_the_legend_names_the_mark_only_for_a_cross_tokenizer_pair():
    for cross in (True, False):
        app = Host(cross=cross)
        async with app.run_test():
            text = app.query_one(Legend).render().plain
            assert (UNALIGNED_LABEL in text) is cross
