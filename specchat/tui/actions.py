"""The app's actions (what keys, the palette and buttons do), as a mixin so that
app.py keeps to wiring. Every action leaves the app usable: with no pair loaded
or an answer streaming, it says why it cannot run instead of failing.
"""

from __future__ import annotations

import re
from specchat.chat.events import StatsSnapshot, TokenSpan
from specchat.chat.verdict import describe, race_verdict
from specchat.history.store import SavedConversation
from specchat.turn import Turn
from specchat.tui.worker import RaceJob
from specchat.tui.transcript import AnswerView, Notice, TokenFlow, UserTurn

K_MAX = 16


class ActionsMixin:
    """Actions of `SpecchatApp`."""

    # ----- answers -------------------------------------------------------------------------

    def action_stop(self) -> None:
        """Stop the streaming answer within one round; the partial answer stays, marked stopped."""
        if self.job is None:
            return
        self.workers.cancel_group(self, "answer")
        if self.job is not None:
            self.job.gate.set()

    def action_new_chat(self) -> None:
        if self.job is not None:
            self.notify("stop the answer first (Esc)", severity="warning")
            return
        self.transcript.remove_children()
        self.last_answer = None
        self.pending_turns = []
        self.recorder.new_chat(self.system)
        if self.backend is not None:
            self.backend.reset(self.system, [])
        self.notify("new chat")

    def action_regenerate(self) -> None:
        if not self._ready_for("regenerate"):
            return
        if self.failed is not None:
            view, text = self.failed
            view.remove()
            self._start_answer(text)
            return
        text = self.backend.drop_last_exchange()
        if text is None or self.last_answer is None:
            self.notify("nothing to regenerate yet")
            return
        self.last_answer.remove()
        self.last_answer = None
        self.recorder.forget_last_exchange()
        self.recorder.user(text, self.pair_name)
        self._start_answer(text)

    def action_copy_answer(self) -> None:
        if self.last_answer is None:
            self.notify("no answer to copy yet")
            return
        text = self.last_answer.text
        self.copy_to_clipboard(text)
        self.notify(f"copied the last answer ({len(text)} characters, no rejected drafts)")

    def action_toggle_ghosts(self) -> None:
        self.ghosts = not self.ghosts
        for flow in self.query(TokenFlow):
            flow.set_ghosts(self.ghosts)
        self.preferences.ghosts = self.ghosts
        from specchat.tui.themes import save_preferences

        save_preferences(self.preferences, self.preferences_path)
        self.notify(f"rejected drafts {'shown' if self.ghosts else 'hidden'}")

    def action_toggle_markdown(self) -> None:
        view = self.last_answer
        if view is None or not view.finished:
            self.notify("no finished answer to switch yet")
            return
        shown = view.toggle_markdown()
        self.notify("Markdown view" if shown else "coloured-token view")

    def action_toggle_speculation(self) -> None:
        self.speculate = not self.speculate
        self.gauges.speculate = self.speculate
        state = "on" if self.speculate else "off (target only)"
        self.notify(f"speculation {state} from the next answer")

    def action_race(self) -> None:
        if not self._ready_for("race"):
            return
        if self.last_speculative is None or not any(t.role == "user" for t in self.backend.turns()):
            self.notify("race needs a speculative answer first: ask something", severity="warning")
            return
        self.job_counter += 1
        self._start_job(RaceJob(self.job_counter, self.backend, self.pacing),
                        f"{self.pair_name} · race: same prompt, target only")

    def _race_result(self, done) -> None:
        spec, gauge = self.last_speculative
        greedy = self.backend.sampling_key()[0] == 0
        dtype = self.info.dtype if self.info else ""
        verdict = race_verdict(spec, done, gauge, greedy, dtype)
        text = describe(verdict)
        self._mount(Notice(text, "race"))
        self.notify(text, timeout=12)

    def action_float32_check(self) -> None:
        """Replay the last prompt greedily in float32, speculative and target-only."""
        if not self._ready_for("replay in float32"):
            return
        if not any(t.role == "user" for t in self.backend.turns()):
            self.notify("the float32 replay needs a question first", severity="warning")
            return
        self.notify("float32 replay: loading a float32 copy of the pair and answering twice…")
        self.gauges.status = "float32 replay running…"
        self._float32_worker(self.backend)

    def on_identity_checked(self, message) -> None:
        self.gauges.status = "ready"
        if message.result is None:
            self.notify(f"float32 replay did not finish: {message.error}", severity="warning")
            return
        text = message.result.describe()
        self._mount(Notice(text, "race"))
        self.notify(text, timeout=12)

    def _ready_for(self, what: str) -> bool:
        if self.job is not None:
            self.notify(f"cannot {what} while an answer streams (Esc stops it)", severity="warning")
            return False
        if self.backend is None:
            self.notify(f"cannot {what}: the pair has not loaded yet", severity="warning")
            return False
        return True

    # ----- decoding knobs ------------------------------------------------------------------

    # k and temperature have one owner, the conversation service: the app asks it to change
    # them and shows what it reports.

    def show_settings(self) -> None:
        """Show the service's k and temperature on the gauges."""
        gauges, backend = self.gauges, self.backend
        gauges.k, gauges.k_auto, gauges.temperature = backend.k, backend.k_auto, backend.temperature
        gauges.sampling = backend.sampling_key()

    def set_k(self, k: int) -> None:
        if self.backend is None:
            self.notify("cannot set k: the pair has not loaded yet", severity="warning")
            return
        self.backend.set_k(max(0, min(K_MAX, k)))
        self.show_settings()
        self.notify(f"k = {self.backend.k} from the next round")

    def action_change_k(self, delta: int) -> None:
        if self.backend is not None:
            self.set_k(self.backend.k + delta)

    def set_temperature(self, temperature: float) -> None:
        if self.backend is None:
            self.notify("cannot set the temperature: the pair has not loaded yet",
                        severity="warning")
            return
        self.backend.set_temperature(round(max(0.0, min(2.0, temperature)), 2))
        self.show_settings()
        self.notify(f"temperature = {self.backend.temperature:g} from the next round")
        if self.job is None:
            self.gauges.calibration = self.current_baseline()
            self._maybe_calibrate()  # target-only speed at the new sampling settings

    def action_change_temperature(self, delta: float) -> None:
        if self.backend is not None:
            self.set_temperature(self.backend.temperature + delta)

    # ----- demos ---------------------------------------------------------------------------

    def action_toggle_presentation(self) -> None:
        screen = self.chat_screen
        screen.toggle_class("-presentation")
        self.notify("presentation mode " + ("on" if screen.has_class("-presentation") else "off"))

    def _show_pacing(self) -> None:
        parts = (["step mode"] if self.pacing.step else []) + (
            [f"slow motion {self.pacing.slow_ms} ms"] if self.pacing.slow_ms else [])
        self.gauges.pacing = " · ".join(parts)
        for legend in self.query("#legend"):
            legend.refresh()

    def action_toggle_step(self) -> None:
        self.pacing.step = not self.pacing.step
        self._show_pacing()
        if not self.pacing.step:
            self.action_step()
        self.notify("step mode on: F8 or Ctrl+F resolves each round" if self.pacing.step
                    else "step mode off")

    def action_step(self) -> None:
        """Resolve the round held in step mode and let the next one come."""
        if self.job is None:
            return
        self._release_held()
        self.job.gate.set()

    def action_toggle_slow(self) -> None:
        self.pacing.slow_ms = 0 if self.pacing.slow_ms else self.preferences.slow_motion_ms
        self._show_pacing()
        self.notify(f"slow motion: {self.pacing.slow_ms} ms per round" if self.pacing.slow_ms
                    else "slow motion off")

    def set_slow_motion(self, ms: int) -> None:
        self.preferences.slow_motion_ms = ms
        from specchat.tui.themes import save_preferences

        save_preferences(self.preferences, self.preferences_path)
        self.pacing.slow_ms = ms
        self._show_pacing()
        self.notify(f"slow motion: {ms} ms per round")

    # ----- screens -------------------------------------------------------------------------

    def action_help(self) -> None:
        from specchat.tui.screens import HelpScreen

        self.push_screen(HelpScreen())

    def action_system_prompt(self) -> None:
        from specchat.tui.screens import SystemPromptScreen

        def apply(text: str | None) -> None:
            self.system = text
            self.recorder.set_system(text)
            if self.backend is not None:
                self.backend.reset(text, self.backend.turns())
            self.notify("system prompt set" if text else "no system prompt")

        self.push_screen(SystemPromptScreen(self.system), apply)

    def action_pick_pair(self) -> None:
        from specchat.tui.screens import PairPickerScreen

        self.push_screen(PairPickerScreen(self.pairs, self.pair_name),
                         lambda name: name and self.switch_pair(name))

    def switch_pair(self, name: str) -> None:
        self.notify(f"loading {name} in the background; the current pair keeps answering")
        self.start_loading(name)

    def action_history(self) -> None:
        from specchat.tui.screens import HistoryScreen

        self.push_screen(HistoryScreen(self.recorder.list()), self._history_choice)

    def _history_choice(self, choice) -> None:
        if not choice:
            return
        what, conversation_id = choice
        if what == "delete":
            self.recorder.delete(conversation_id)
            self.notify("conversation deleted")
        elif what == "open":
            if not self._ready_to_reopen():
                return
            conversation = self.recorder.load(conversation_id)
            if conversation is not None:
                self.show_saved(conversation)
        else:
            self.export(conversation_id, what)

    def _ready_to_reopen(self) -> bool:
        if self.job is not None:
            self.notify("stop the answer first (Esc)", severity="warning")
            return False
        return True

    def show_saved(self, conversation: SavedConversation) -> None:
        """Replace the transcript with a saved conversation, colours included."""
        self.transcript.remove_children()
        for turn in conversation.turns:
            if turn.role == "user":
                self._mount(UserTurn(turn.text))
                continue
            spans = [TokenSpan(t.text, t.kind, t.token_id or 0) for t in turn.tokens]
            view = AnswerView(f"{conversation.pair} · {turn.mode}", self.ghosts, spans)
            self._mount(view)
            view.call_after_refresh(view.finish, stats_from_dict(turn.stats), turn.status)
            self.last_answer = view
        self.system = conversation.system
        self.pending_turns = conversation_turns(conversation)
        self.recorder.reopen(conversation)
        if self.backend is not None:
            self.backend.reset(self.system, self.pending_turns)

    # ----- export --------------------------------------------------------------------------

    def export_current(self, fmt: str) -> None:
        if self.recorder.conversation_id is None:
            self.notify("nothing to export yet")
            return
        self.export(self.recorder.conversation_id, fmt)

    def export(self, conversation_id: int, fmt: str) -> None:
        from specchat import paths
        from specchat.history import export

        conversation = self.recorder.load(conversation_id)
        if conversation is None:
            return
        if fmt == "html":
            content = export.to_html(conversation, self.export_colours())
        else:
            content = export.to_json(conversation) if fmt == "json" else export.to_markdown(conversation)
        slug = re.sub(r"[^a-z0-9]+", "-", conversation.title.lower()).strip("-")[:40] or "chat"
        suffix = {"markdown": "md", "json": "json", "html": "html"}[fmt]
        target = paths.data_dir() / "exports" / f"{conversation.id}-{slug}.{suffix}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except OSError as error:
            self.notify(f"export failed: {error}", severity="error")
            return
        self.notify(f"exported to {target}", timeout=10)

    def export_colours(self) -> dict[str, str]:
        variables = self.theme_variables
        colours = {kind: variables.get(f"spec-{kind}", "") for kind in
                   ("accepted", "rejected", "resampled", "bonus", "target")}
        theme = self.current_theme
        colours["foreground"] = str(theme.foreground or variables.get("foreground", "#000"))
        colours["background"] = str(theme.background or "#fff")
        return colours


def stats_from_dict(data: dict | None) -> StatsSnapshot | None:
    """A saved answer's figures (`StatsSnapshot.as_dict`) back as a snapshot."""
    if not data:
        return None
    fields = StatsSnapshot.__dataclass_fields__
    return StatsSnapshot(**{key: tuple(value) if isinstance(value, list) else value
                            for key, value in data.items() if key in fields})


def conversation_turns(conversation: SavedConversation) -> list[Turn]:
    """The turns to continue from: failed answers and the messages they answered are left out."""
    turns: list[Turn] = []
    for turn in conversation.turns:
        if turn.role == "assistant" and turn.status == "error":
            if turns and turns[-1].role == "user":
                turns.pop()
            continue
        turns.append(Turn(turn.role, turn.text))
    return turns
