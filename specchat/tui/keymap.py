"""A user's keymap: `keymap.toml` in the config folder moves the chat's keys.

    [keys]
    k-up = "f10,ctrl+up"
    temperature-down = "alt+minus"

Each entry names a binding id of tui/keys.py (the chat's keys or a dialog's) and the
Textual key names it answers to
(comma-separated), handed to Textual's `App.set_keymap`. A file that does not read, an
unknown id or a value that is not text never stops the chat: it is skipped, and the
problem is said on screen. Knows nothing about the app but the ids of the key tables.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from specchat import paths
from specchat.tui.keys import binding_ids

KEYMAP_FILE = "keymap.toml"


def keymap_file() -> Path:
    return paths.config_dir() / KEYMAP_FILE


def entry_problem(binding: str, value) -> str | None:
    if binding not in binding_ids():
        return f"unknown key id '{binding}' (ids: {', '.join(sorted(binding_ids()))})"
    if not isinstance(value, str) or not value.strip():
        return f"'{binding}' must be key names in quotes, like \"f10,ctrl+up\" (got {value!r})"
    return None


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """(binding id -> keys, problems): the entries that read, and one line per skipped one."""
    path = path or keymap_file()
    if not path.is_file():
        return {}, []
    where = f"keymap file {path}"
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as error:
        return {}, [f"{where}: not valid TOML ({error}); using the default keys"]
    problems = [f"{where}: unknown table or key '{name}' (keys go under [keys]); skipped it"
                for name in data if name != "keys"]
    table = data.get("keys", {})
    if not isinstance(table, dict):
        return {}, problems + [f"{where}: 'keys' must be a table: [keys]; using the default keys"]
    keymap = {}
    for binding, value in table.items():
        problem = entry_problem(binding, value)
        if problem:
            problems.append(f"{where}: {problem}; skipped it")
        else:
            keymap[binding] = value.strip()
    return keymap, problems
