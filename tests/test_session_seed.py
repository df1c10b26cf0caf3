"""A chat session samples from a seed it reports: the one given, else one drawn from
the OS, so unseeded sessions differ and a reported seed repeats an answer."""

from __future__ import annotations

import dataclasses

from specchat.chat.session import ChatSession
from specchat.engine.params import SamplingParams


def sampled_pair(load_tiny):
    pair = load_tiny("tiny")
    sampled = dataclasses.replace(pair.config, sampling=SamplingParams(temperature=1.0))
    return dataclasses.replace(pair, config=sampled)


def answer_text(session: ChatSession) -> str:
    return list(session.answer("hello", max_new_tokens=16))[-1].text


def test_unseeded_sessions_draw_different_seeds_and_sample_different_answers(load_tiny):
    pair = sampled_pair(load_tiny)
    sessions = [ChatSession(pair) for _ in range(3)]
    assert len({s.seed for s in sessions}) == 3
    assert len({answer_text(s) for s in sessions}) > 1


def test_the_reported_seed_reproduces_the_answer(load_tiny):
    pair = sampled_pair(load_tiny)
    first = ChatSession(pair)
    again = ChatSession(pair, seed=first.seed)
    assert again.seed == first.seed
    assert answer_text(again) == answer_text(first)


def test_a_given_seed_is_kept_and_reported(load_tiny):
    session = ChatSession(sampled_pair(load_tiny), seed=42)
    assert session.seed == 42
    assert answer_text(session) == answer_text(ChatSession(sampled_pair(load_tiny), seed=42))
