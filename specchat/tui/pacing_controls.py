"""Step mode and slow motion: the keys that pace an answer for an audience.

`PacingControls` owns the pacing keys (F7, F8 / Ctrl+F, Ctrl+L) and the slow-motion delay
set in the palette; the pacing itself (`worker.Pacing`) is read by the answer worker, which
holds each round at its gate. It reaches the transcript (the answer that streams, the
round held on screen) and the gauges; it never decodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.tui.answers import ChatTranscript


class PacingControls:
    """Step mode and slow motion for the answer on screen."""

    def __init__(self, transcript: ChatTranscript):
        self.transcript = transcript

    @property
    def pacing(self):
        return self.transcript.pacing

    def _show(self) -> None:
        pacing = self.pacing
        parts = (["step mode"] if pacing.step else []) + (
            [f"slow motion {pacing.slow_ms} ms"] if pacing.slow_ms else [])
        self.transcript.gauges.pacing = " · ".join(parts)
        for legend in self.transcript.screen.query("#legend"):
            legend.refresh()

    def action_toggle_step(self) -> None:
        self.pacing.step = not self.pacing.step
        self._show()
        if not self.pacing.step:
            self.action_step()
        self.transcript.notify("step mode on: F8 or Ctrl+F resolves each round"
                               if self.pacing.step else "step mode off")

    def action_step(self) -> None:
        """Resolve the round held in step mode and let the next one come."""
        self.transcript.release_round()

    def action_toggle_slow(self) -> None:
        self.pacing.slow_ms = 0 if self.pacing.slow_ms else self.transcript.slow_motion_ms
        self._show()
        self.transcript.notify(f"slow motion: {self.pacing.slow_ms} ms per round"
                               if self.pacing.slow_ms else "slow motion off")

    def set_slow_motion(self, ms: int) -> None:
        """Slow motion on, at this delay (remembered)."""
        self.transcript.slow_motion_ms = self.pacing.slow_ms = ms
        self.transcript.host.remember(slow_motion_ms=ms)
        self._show()
        self.transcript.notify(f"slow motion: {ms} ms per round")
