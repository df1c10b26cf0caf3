"""The app side of `python -m devtools bench-ui`: the chat app on a timed scripted pair,
driven by itself, writing its measurements to a JSON file and exiting.

Run by ui_bench.py inside a pseudo-terminal; `python -m devtools.ui_bench_child
RATE TOKENS ANSWERS OUT.json`. It times the conversation widget from a subclass
(when a round is handled, before it is drawn) and counts frames through Textual's
public `call_after_refresh`: the first frame after a round reaches the screen.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from specchat.chat.events import RoundUpdate
from specchat.tui.answers import ChatTranscript
from specchat.tui.app import SpecchatApp
from specchat.chat.scripted import FakeConfig, ScriptedService
from specchat.tui.messages import AnswerFinished, RoundArrived


def bench_text(tokens: int) -> str:
    """Word tokens in paragraphs of about 60 words, as an answer has."""
    words = [f"w{i}" + ("\n\n" if i % 60 == 59 else "") for i in range(tokens)]
    return " ".join(words)


class TimedService(ScriptedService):
    """Records when each round is handed to the worker and how long the worker kept it."""

    def answer(self, text, speculate, should_stop):
        self.yielded: list[float] = []
        self.held: list[float] = []
        self.started = time.perf_counter()
        for event in super().answer(text, speculate, should_stop):
            now = time.perf_counter()
            if isinstance(event, RoundUpdate):
                self.yielded.append(now)
            yield event
            if isinstance(event, RoundUpdate):
                self.held.append(time.perf_counter() - now)


class TimedTranscript(ChatTranscript):
    """Notes when each round is handled and when a frame shows it, and tells the app when
    an answer ends."""

    frame_pending = False

    @property
    def bench(self) -> BenchApp:
        """The app: always the bench's, which names this class as its transcript."""
        app = self.app
        assert isinstance(app, BenchApp)
        return app

    # Textual calls these handlers and then the parent class's (each class in the MRO): no super().
    def on_round_arrived(self, message: RoundArrived) -> None:
        self.bench.handled.extend([time.perf_counter()] * len(message.updates))
        if not self.frame_pending:
            self.frame_pending = True
            self.call_after_refresh(self._frame_shown)

    def _frame_shown(self) -> None:
        self.frame_pending = False
        self.bench.frames.append(time.perf_counter())

    def on_answer_finished(self, message: AnswerFinished) -> None:
        self.bench.answer_finished()


class BenchApp(SpecchatApp):
    """Asks `answers` questions one after another and times what it sees."""

    TRANSCRIPT = TimedTranscript

    def __init__(self, rate: float, tokens: int, answers: int, out: str):
        self.config = FakeConfig(name="bench", tokens_per_s=rate, answer=bench_text(tokens))
        self.timed = TimedService(self.config)
        super().__init__(lambda name: self.timed, [("bench", "timed scripted pair")], "bench")
        self.rate, self.tokens, self.remaining, self.out = rate, tokens, answers, out
        self.handled: list[float] = []
        self.frames: list[float] = []
        self.results: list[dict] = []
        self.asking = False

    # Textual calls this handler and then the app's own (each class in the MRO): no super().
    def on_baseline_measured(self, message) -> None:
        """The first baseline is measured: start asking (later ones, measured between
        answers for the longer context, start nothing)."""
        if not self.asking:
            self.asking = True
            self.ask()

    def ask(self) -> None:
        self.handled, self.frames = [], []
        self.cpu_at_start = (time.thread_time(), time.perf_counter(), os.times())
        self.transcript.submit("stream please")

    def answer_finished(self) -> None:
        self.cpu_at_end = (time.thread_time(), time.perf_counter(), os.times())
        self.set_timer(0.3, self.measure)

    def measure(self) -> None:
        result = measure(self.timed, self.handled, self.frames, self.rate)
        result.update(cpu_use(self.cpu_at_start, self.cpu_at_end))
        self.results.append(result)
        self.remaining -= 1
        if self.remaining:
            self.ask()
            return
        with open(self.out, "w") as file:
            json.dump({"rate": self.rate, "tokens": self.tokens, "answers": self.results}, file)
        self.exit()


def cpu_use(start: tuple, end: tuple) -> dict:
    """How busy the UI thread and the whole process were while the answer streamed
    (the load average says how much of the machine others took)."""
    (thread0, wall0, times0), (thread1, wall1, times1) = start, end
    elapsed = wall1 - wall0
    process = times1.user + times1.system - times0.user - times0.system
    return {"ui_thread_cpu_share": (thread1 - thread0) / elapsed,
            "process_cpu_share": process / elapsed, "load_average": os.getloadavg()[0]}


def measure(service: TimedService, handled: list[float], frames: list[float], rate: float) -> dict:
    yielded = service.yielded
    delays = sorted((h - y) * 1000 for h, y in zip(handled, yielded))
    last = yielded[-1]
    last_handled = handled[len(yielded) - 1]
    first_frame = next((f for f in frames if f >= last_handled), None)
    tokens = service.config.answer.count(" ") + 1
    scheduled_end = service.started + tokens / rate
    return {
        "rounds": len(yielded),
        "achieved_tokens_per_s": tokens / (last - service.started),
        "behind_schedule_ms": max(0.0, (last - scheduled_end) * 1000),
        "post_ms_max": max(service.held) * 1000,
        "post_ms_mean": statistics.fmean(service.held) * 1000,
        "handle_ms_p50": delays[len(delays) // 2],
        "handle_ms_p99": delays[min(len(delays) - 1, int(len(delays) * 0.99))],
        "handle_ms_max": delays[-1],
        "final_frame_ms": None if first_frame is None else (first_frame - last) * 1000,
        "frames": len(frames),
    }


if __name__ == "__main__":  # pragma: no cover
    rate, tokens, answers, out = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    BenchApp(rate, tokens, answers, out).run()
