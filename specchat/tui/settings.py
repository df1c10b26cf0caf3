"""What the user sets for the next answers: the pair, k, temperature, the system
prompt, presentation mode; and the actions that change them.

k and temperature have one owner, the pair's conversation service: `Settings` asks it
to change them and shows what it reports. The k and temperature given on the
command line apply to the first pair only. Reaches the app through `SettingsHost`;
knows no widget but the gauges, the chat screen's class and the modal screens, and
never imports models or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from textual.notifications import SeverityLevel

from specchat.chat.service import FIXED_DRAFT_LENGTH, ConversationService, PairInfo

if TYPE_CHECKING:  # the app's other part, as the host protocol names it
    from specchat.tui.history_actions import HistoryActions


class SettingsHost(Protocol):
    """What the settings need of the app."""

    service: ConversationService | None
    pairs: list[tuple[str, str]]
    pair_name: str
    history: HistoryActions
    chat_screen: Any
    gauges: Any
    pair: Any

    def push_screen(self, screen: Any, callback: Any = None) -> object: ...
    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ...,
               timeout: float | None = ..., markup: bool = ...) -> None: ...


class Settings:
    """The decoding knobs, the system prompt and the pair choice."""

    def __init__(self, app: SettingsHost, k: int | None, temperature: float | None,
                 system: str | None):
        self.app = app
        self.cli_k, self.cli_temperature = k, temperature
        self.system = system

    def adopt(self, service: ConversationService, info: PairInfo, first: bool) -> None:
        """A pair takes over: the command line's k and temperature (first pair), or its own."""
        if self.cli_k is not None and first:
            service.set_k(self.cli_k)  # a fixed k replaces the pair's adaptive policy
        cli = self.cli_temperature if first else None
        service.set_temperature(cli if cli is not None else info.temperature)
        self.show()

    def show(self) -> None:
        """Show the service's k and temperature on the gauges."""
        gauges, service = self.app.gauges, self.app.service
        if service is None:
            return
        gauges.k, gauges.k_auto, gauges.temperature = service.k, service.k_auto, service.temperature
        gauges.sampling = service.sampling_params()

    def _service(self, what: str) -> ConversationService | None:
        if self.app.service is None:
            self.app.notify(f"cannot set {what}: the pair has not loaded yet", severity="warning")
        return self.app.service

    # ----- k and temperature ---------------------------------------------------------------

    def set_k(self, k: int) -> None:
        """A fixed k from the next round; one outside 0..K_MAX (engine/params.py) is refused
        with a message that names the range, as the config file and -k would."""
        service = self._service("k")
        if service is None:
            return
        problem = FIXED_DRAFT_LENGTH.message("k", k)
        if problem:
            self.app.notify(problem, severity="warning")
            return
        service.set_k(k)
        self.show()
        self.app.notify(f"k = {service.k} from the next round")

    def action_change_k(self, delta: int) -> None:
        if self.app.service is not None:
            self.set_k(self.app.service.k + delta)

    def set_temperature(self, temperature: float) -> None:
        service = self._service("the temperature")
        if service is None:
            return
        service.set_temperature(round(max(0.0, min(2.0, temperature)), 2))
        self.show()
        self.app.notify(f"temperature = {service.temperature:g} from the next round")
        self.app.pair.refresh_baseline()  # target-only speed at the new sampling settings

    def action_change_temperature(self, delta: float) -> None:
        if self.app.service is not None:
            self.set_temperature(self.app.service.temperature + delta)

    # ----- system prompt, presentation, pair -----------------------------------------------

    def action_system_prompt(self) -> None:
        from specchat.tui.screens import SystemPromptScreen

        self.app.push_screen(SystemPromptScreen(self.system), self._set_system)

    def _set_system(self, text: str | None) -> None:
        app = self.app
        self.system = text
        app.history.live_recorder.set_system(text)
        if app.service is not None:
            app.service.reset(text, app.service.turns())
        app.notify("system prompt set" if text else "no system prompt")

    def action_toggle_presentation(self) -> None:
        screen = self.app.chat_screen
        screen.transcript.past.open()  # the labels' rows come and go
        screen.toggle_class("-presentation")
        shown = screen.has_class("-presentation")
        self.app.notify("presentation mode " + ("on" if shown else "off"))

    def action_pick_pair(self) -> None:
        from specchat.tui.screens import PairPickerScreen

        self.app.push_screen(PairPickerScreen(self.app.pairs, self.app.pair_name),
                             lambda name: name and self.app.pair.switch(name))
