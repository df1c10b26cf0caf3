"""The Textual chat app: live speculation view, gauges, trials and history.

Textual only: never imports torch, not even at startup. The model work happens
behind the `Backend` protocol (backend.py), in one thread worker per answer.
"""
