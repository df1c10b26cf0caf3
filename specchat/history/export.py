"""Exports of a saved conversation: Markdown, JSON, and a self-contained HTML page
with every token in its kind's colour and the conversation's charts (inline SVG,
history/chart_svg.py).

The Markdown text and every `text` field are the committed answer: rejected
drafts never appear in them. JSON lists each token with its kind (rejected ones
labelled as such); the HTML page draws rejected drafts as struck-through ghosts (a newline
in one as ↵), hidden until a checkbox shows them, and not selectable, so copying the page's
text never picks them up. Markdown and the HTML page are text a terminal may show (printed
to stdout, or `cat` later): their control characters are made visible, as ^[ or <U+009B>
(specchat/control_chars.py); JSON keeps the exact text, escaped. Strings in, strings out:
no file system, no Textual.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone

from specchat.control_chars import json_text, visible, visible_ghost
from specchat.history.chart_svg import charts_html
from specchat.history.charts import saved_series
from specchat.history.store import SavedConversation, SavedToken, SavedTurn
from specchat.token_kinds import TOKEN_KINDS


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _stats_line(turn: SavedTurn) -> str:
    stats = turn.stats or {}
    parts = [turn.mode] if turn.mode else []
    if stats.get("tokens_per_s"):
        parts.append(f"{stats['tokens_per_s']:.1f} tok/s")
    if stats.get("acceptance_rate") is not None:
        parts.append(f"acceptance {stats['acceptance_rate'] * 100:.0f}%")
    if stats.get("mean_acceptance_length"):
        parts.append(f"τ {stats['mean_acceptance_length']:.2f}")
    if turn.status != "done":
        parts.append(turn.status)
    return " · ".join(parts)


def to_markdown(conversation: SavedConversation) -> str:
    lines = [f"# {conversation.title}", "",
             f"*{_when(conversation.created)} · pair {conversation.pair or 'unknown'}*", ""]
    if conversation.system:
        lines += ["**System:** " + conversation.system, ""]
    for turn in conversation.turns:
        if turn.role == "user":
            lines += ["## You", "", turn.text, ""]
        else:
            lines += ["## Assistant", "", turn.text, ""]
            summary = _stats_line(turn)
            if summary:
                lines += [f"*{summary}*", ""]
    return visible("\n".join(lines).rstrip() + "\n")


def to_json(conversation: SavedConversation) -> str:
    data = {"title": conversation.title, "pair": conversation.pair,
            "system": conversation.system, "created": conversation.created,
            "turns": [{"role": t.role, "text": t.text, "status": t.status, "mode": t.mode,
                       "stats": t.stats,
                       "tokens": [{"text": tok.text, "kind": tok.kind, "id": tok.token_id}
                                  for tok in t.tokens]} for t in conversation.turns]}
    return json_text(data, indent=2) + "\n"


def _css(colours: dict[str, str]) -> str:
    rules = [f".{kind}{{color:{colours.get(kind, colours.get('foreground', '#000'))}}}"
             for kind in TOKEN_KINDS]
    return (
        f"body{{background:{colours.get('background', '#fff')};"
        f"color:{colours.get('foreground', '#000')};font-family:ui-monospace,monospace;"
        "max-width:60em;margin:2em auto;padding:0 1em;line-height:1.5}"
        ".answer,.user{white-space:pre-wrap}"
        ".user{border-left:3px solid currentColor;padding-left:.6em;opacity:.85}"
        ".rejected{text-decoration:line-through;opacity:.55;user-select:none;display:none}"
        "#ghosts:checked~main .rejected{display:inline}"
        ".meta{opacity:.7;font-size:.9em}.legend span{margin-right:1.2em}"
        ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(24em,1fr));gap:0 1em}"
        ".charts h2,.charts p{grid-column:1/-1}.charts figure{margin:.5em 0}"
        ".charts svg{width:100%;height:auto}"
        + "".join(rules))


def _h(text: str) -> str:
    """Text for the page: controls made visible (before escaping: <U+009B> is no tag)."""
    return html.escape(visible(text))


def _token_html(token: SavedToken) -> str:
    """A token's text for the page; a rejected draft's newline as ↵, since the page keeps
    the answer's line breaks (pre-wrap) and a ghost must not add one."""
    if token.kind == "rejected":
        return html.escape(visible_ghost(token.text))
    return _h(token.text)


def _turn_html(turn: SavedTurn) -> str:
    if turn.role == "user":
        return f'<h3>You</h3><div class="user">{_h(turn.text)}</div>'
    if turn.tokens:
        body = "".join(f'<span class="{_h(t.kind)}">{_token_html(t)}</span>'
                       for t in turn.tokens)
    else:
        body = _h(turn.text)
    meta = _stats_line(turn)
    return (f'<h3>Assistant</h3><div class="answer">{body}</div>'
            + (f'<p class="meta">{_h(meta)}</p>' if meta else ""))


def to_html(conversation: SavedConversation, colours: dict[str, str]) -> str:
    """A standalone page; `colours` maps token kinds (and foreground/background) to CSS colours."""
    legend = "".join(f'<span class="{k}">■ {k}</span>' for k in TOKEN_KINDS)
    system = (f'<p class="meta">System: {_h(conversation.system)}</p>'
              if conversation.system else "")
    turns = "".join(_turn_html(turn) for turn in conversation.turns)
    charts = charts_html(saved_series(conversation), colours)
    title = _h(conversation.title)
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_css(colours)}</style></head><body>"
        f'<input type="checkbox" id="ghosts"><label for="ghosts"> show rejected drafts</label>'
        f"<main><h1>{title}</h1><p class=\"meta\">{_when(conversation.created)} · pair "
        f"{_h(conversation.pair or 'unknown')}</p>"
        f'<p class="legend">{legend}</p>{system}{turns}{charts}</main></body></html>\n')
