"""The Textual chat app: live speculation view, gauges, trials and history.

Textual only: never imports torch, not even at startup. The model work happens
behind the chat layer's `ConversationService` protocol (chat/service.py), which the
CLI hands over; one thread worker per answer. Never imports models.
"""
