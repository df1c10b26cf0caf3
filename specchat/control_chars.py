"""Control characters in untrusted text made visible, the one rendering every output uses.

Model output is untrusted input, and so is a saved conversation and a prompt that a draft
copies: an ESC, a CSI (ESC [ or U+009B) or an OSC (ESC ]) in it would set the terminal's
title, clear the screen or worse wherever it is printed. Every path that writes such text
to a terminal or a text file (`specchat run`, `history show|list|export`, the unsaved copy of
a conversation, the chat's screen) shows C0 and C1 controls and DEL the way `less` and
`cat -v` do: C0 and DEL in caret notation (ESC is ^[, BEL ^G, CR ^M, DEL ^?), C1 as <U+009B>.
Newline and tab stay what they are, but in a rejected draft (a ghost) a newline is drawn as
↵. JSON outputs keep the exact text: `json_text` escapes
the C1 controls (and DEL) too, which `json.dumps(ensure_ascii=False)` leaves raw, so that the
text decodes back byte for byte and no raw control reaches a terminal.

A leaf: standard library only; it knows nothing about models, screens or files.
"""

from __future__ import annotations

import json
import re
from typing import Any

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but newline and tab, DEL, and the C1 controls."""
RAW_IN_JSON = re.compile("[\x7f-\x9f]")
"""What `json.dumps(ensure_ascii=False)` leaves raw of CONTROLS (it escapes all of C0)."""


def shown(char: str) -> str:
    """How one control character is shown: ^[ for ESC, ^? for DEL, <U+009B> for a C1."""
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """`text` with every control character but newline and tab made visible."""
    if not CONTROLS.search(text):
        return text
    return CONTROLS.sub(lambda match: shown(match.group()), text)


GHOST_NEWLINE = "↵"
"""How a rejected draft's newline is drawn."""


def visible_ghost(text: str) -> str:
    """A rejected draft's text as drawn: `visible`, and each newline as ↵. A ghost shows what
    the draft guessed but is never part of the text, so it must not break a line the text
    does not break."""
    return visible(text).replace("\n", GHOST_NEWLINE)


def json_text(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)` with DEL and the C1 controls escaped
    as \\u007f .. \\u009f as well: the exact text, and nothing raw a terminal would obey."""
    dumped = json.dumps(value, ensure_ascii=False, **options)
    return RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", dumped)
