"""Conversation history: an SQLite file in the user data directory, written as an
answer streams, and exports to Markdown, JSON and a self-contained HTML page.

Standard library only (sqlite3, json, html): no textual, no torch. The TUI
writes to it; anyone can read it.
"""
