"""The chat layer: conversation and chat template, incremental detokenizing, and
mapping engine rounds to coloured text spans and statistics. No Textual here.

Import `specchat.chat.events` for the event types (no torch); `specchat.chat.session`
for `ChatSession`, which loads the engine.
"""
