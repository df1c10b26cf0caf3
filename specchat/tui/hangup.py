"""Ending the app when its terminal goes away, or when it is told to (SIGTERM), so that no
chat is left spinning alone and no terminal is left in the app's modes.

Two ways a terminal goes: SIGHUP reaches the process (a closed window, `tmux kill-session`
on a pane that runs `specchat` itself), or it does not (the chat runs under `make chat`,
whose shell takes the signal) and the terminal is simply hung up: reading it returns
nothing at once, forever, which kept Textual's input thread at 100% of a core. The watch
handles both: a SIGHUP handler, and a check twice a second that standard input is still a
terminal. Either way the process is sure to end FORCE_AFTER_S later (armed first, so that
neither a locked history file nor an exit that hangs on the dead terminal can delay it), the
history flushed (a save waits for a lock only briefly; what it cannot save is written beside
the database) and the app asked to exit.

SIGTERM (`kill`, a service manager, a closing IDE) ends the app the way a quit does, with
status 143: the history closed, the terminal restored (out of the alternate screen, mouse
tracking off, the cursor shown; the default action left all three as the app had set them)
and where an unsaved copy went said on stderr; should that exit hang, the process ends
TERMINATE_FORCE_AFTER_S later. Textual and the standard library only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

CHECK_EVERY_S = 0.5
FORCE_AFTER_S = 1.0
"""Time the app's own exit gets before the process ends regardless (it may block writing
to the dead terminal)."""
HANGUP_STATUS = 129
"""128 + SIGHUP, as a shell reports a process that a hang-up ended."""
TERMINATE_FORCE_AFTER_S = 3.0
"""Time the app's own exit gets after SIGTERM (the terminal is alive: it is restored)."""
TERMINATED_STATUS = 143
"""128 + SIGTERM."""


class HangupWatch:
    """Watches the app's terminal and SIGTERM, and ends the app on either."""

    def __init__(self, app, fd: int | None = None):
        self.app = app
        stdin = sys.__stdin__  # None where the app was started with its stdin closed
        self.fd = fd if fd is not None else stdin.fileno() if stdin is not None else -1
        self.fired = False

    def start(self) -> None:
        """Arm the watch (only where the app runs on a real terminal)."""
        if self.app.is_headless or not os.isatty(self.fd):
            return
        self.app.set_interval(CHECK_EVERY_S, self.check)
        on_signal(signal.SIGHUP, self.hang_up)
        on_signal(signal.SIGTERM, self.terminate)

    def check(self) -> None:
        if not os.isatty(self.fd):
            self.hang_up()

    def hang_up(self) -> None:
        """Save what there is, ask the app to exit, and make sure the process ends."""
        self._end(HANGUP_STATUS, FORCE_AFTER_S)

    def terminate(self) -> None:
        """SIGTERM: quit as the user's quit does, with status 143."""
        self._end(TERMINATED_STATUS, TERMINATE_FORCE_AFTER_S)

    def _end(self, status: int, force_after_s: float) -> None:
        if self.fired:
            return
        self.fired = True
        threading.Timer(force_after_s, os._exit, (status,)).start()  # first: nothing delays it
        try:
            self.app.history.close()
        finally:
            self.app.exit(return_code=status)


def on_signal(signum: int, handler) -> None:
    """Run `handler` on the app's loop when `signum` arrives."""
    try:
        asyncio.get_running_loop().add_signal_handler(signum, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        signal.signal(signum, lambda *_: handler())
