"""A chat smoke run for an installed specchat: opens the real app headless on a pair
(`python wheel_chat_smoke.py MODELS_TOML PAIR`), sends "hi", and waits until the
history database holds a finished answer. Prints the theme and the saved answer.

Drives the app only through keys and reads only the history file, so it checks
what a user would see saved, not the app's internals. Exit status 0 on success.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path


def finished_answer():
    from specchat.history.store import HistoryStore

    store = HistoryStore()
    try:
        for summary in store.list_conversations():
            turns = store.load(summary.id).turns
            if any(t.role == "assistant" and t.status == "done" for t in turns):
                return turns
    finally:
        store.close()
    return None


async def smoke(models_toml: Path, pair: str, timeout: float = 240.0) -> int:
    from specchat.commands.chat import build_app
    from specchat.models.config.pairs import load_catalog

    catalog = load_catalog(models_toml)
    app = build_app(catalog, catalog.get(pair), None, None, 8, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("h", "i", "enter")
        deadline = time.monotonic() + timeout
        while (turns := finished_answer()) is None:
            if time.monotonic() > deadline:
                print("no finished answer in time", file=sys.stderr)
                return 1
            await pilot.pause(0.2)
        print(f"theme: {app.theme}")
        print(f"answer: {turns[-1].text!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(smoke(Path(sys.argv[1]), sys.argv[2])))
