"""The TUI never imports torch: not when its modules load, not while it runs on a
scripted pair. (A real pair's service imports torch inside its worker thread only.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, "tests")
    import specchat.cli, specchat.commands.chat, specchat.tui.app, specchat.chat.pair_service
    from tui_support import ask, make_app, ready

    async def main():
        app = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await ask(pilot)
            await pilot.press("ctrl+g", "ctrl+t", "f5")
            await pilot.pause(0.3)

    asyncio.run(main())
    heavy = sorted(m for m in ("torch", "transformers", "numpy") if m in sys.modules)
    print("HEAVY", heavy)
""")


def test_the_tui_runs_without_importing_torch(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPECCHAT_CONFIG_DIR=str(tmp_path / "c"),
               SPECCHAT_DATA_DIR=str(tmp_path / "d"))
    result = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "HEAVY []" in result.stdout
