"""Replays of the last prompt that check what the chat claims: the race (F5: target-only
with the same history and sampling, its tokens/s beside the answer's and the gauge's
estimate, and whether the greedy texts are identical) and the float32 replay (Ctrl+B:
speculative and target-only greedy in float32, which must be identical).

`Replays` owns those two keys and says what they found in the transcript (a notice that
stays) and a toast. The replays run as jobs of the transcript's answer worker; the
verdicts are the chat layer's (chat/verdict.py). Never imports torch or models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specchat.chat.baseline import gauge_speedup
from specchat.chat.verdict import describe, race_verdict
from specchat.tui.transcript import Notice
from specchat.tui.worker import RaceJob

if TYPE_CHECKING:
    from specchat.chat.events import AnswerDone
    from specchat.tui.answers import ChatTranscript


class Replays:
    """The race and the float32 replay of the last prompt."""

    def __init__(self, transcript: ChatTranscript):
        self.transcript = transcript

    def action_race(self) -> None:
        transcript = self.transcript
        if not transcript.ready_for("race"):
            return
        if transcript.last_speculative is None or not transcript.asked():
            transcript.notify("race needs a speculative answer first: ask something",
                              severity="warning")
            return
        transcript.start_replay(RaceJob(transcript.next_job_id(), transcript.service,
                                        transcript.pacing),
                                f"{transcript.host.pair_name} · race: same prompt, target only")

    def action_float32_check(self) -> None:
        """Replay the last prompt greedily in float32, speculative and target-only."""
        transcript = self.transcript
        if not transcript.ready_for("replay in float32"):
            return
        if not transcript.asked():
            transcript.notify("the float32 replay needs a question first", severity="warning")
            return
        transcript.notify("float32 replay: loading a float32 copy of the pair and answering twice…")
        transcript.gauges.status = "float32 replay running…"
        transcript.float32_worker(transcript.service)

    def race_finished(self, done: AnswerDone) -> None:
        """The race's verdict against the last speculative answer and its gauge."""
        host, last = self.transcript.host, self.transcript.last_speculative
        if last is None:  # a race starts only after a speculative answer
            return
        spec, baseline = last
        greedy = self.transcript.service.sampling_params().greedy
        verdict = race_verdict(spec, done, gauge_speedup(spec.stats, baseline), greedy,
                               host.info.dtype if host.info else "", baseline)
        self.announce(describe(verdict))

    def announce(self, text: str) -> None:
        """A replay's result: a notice that stays in the transcript, and a toast."""
        self.transcript.mount(Notice(text, "race"))
        self.transcript.notify(text, timeout=12)
