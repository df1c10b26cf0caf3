"""A chat's next question keeps what the caches hold of the conversation (engine/held_tokens.py,
decoder.py's `prepare`): only the new tokens are read, the answer is the one empty caches
give, and a cache something else used meanwhile is never kept."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specchat.chat.decoding import decoder_for
from specchat.chat.events import AnswerDone, ReadingPrompt, RoundUpdate
from specchat.chat.session import ChatSession
from specchat.engine import Decoder, Round, Settings
from specchat.engine.held_tokens import common_prefix, kept_prefix
from specchat.engine.protocol import HeldTokens

FIRST = [5, 17, 42, 99, 7, 250, 13, 64, 128, 31]
EXTRA = [3, 9, 27, 81]
"""The next question's new tokens, after the first answer."""


def committed(decoder: Decoder, prompt: list[int], settings: Settings, n: int,
              keep: int = 0) -> tuple[list[int], list[Round]]:
    rounds = [e for e in decoder.generate(prompt, settings, n, keep=keep) if isinstance(e, Round)]
    return [t for r in rounds for t in r.committed], rounds


@dataclasses.dataclass
class SecondAnswer:
    held: int
    """Committed tokens of the first exchange the target's cache held (all but the newest)."""
    kept: int
    answer: list[int]
    rounds: list[Round]
    fresh: list[int]
    """Target-only from empty caches: what the kept answer must equal."""
    fresh_rounds: list[Round]
    """The same pair's speculative rounds from empty caches."""


def second_answer(pair, k: int = 3, n: int = 14, between=None) -> SecondAnswer:
    """A first answer, then a prompt that extends it by `EXTRA` (the chat's next question)
    answered keeping what the caches hold, by a decoder (and drafter) of its own as in the
    chat; `between(pair, sequence)` runs in between."""
    settings = Settings(k=k)
    first, _ = committed(decoder_for(pair), FIRST, settings, n)
    prompt = FIRST + first + EXTRA
    if between is not None:
        between(pair, FIRST + first)
    decoder = decoder_for(pair)
    kept = decoder.prepare(prompt, len(prompt))
    answer, rounds = committed(decoder, prompt, settings, n, keep=len(prompt))
    fresh, _ = committed(decoder_for(pair, speculate=False), prompt, Settings(k=0), n)
    _, fresh_rounds = committed(decoder_for(pair), prompt, settings, n)
    return SecondAnswer(len(FIRST) + len(first) - 1, kept, answer, rounds, fresh, fresh_rounds)


def assert_reads_only_the_new_tokens(result: SecondAnswer) -> None:
    first = result.rounds[0]
    prompt = result.held + 1 + len(EXTRA)
    assert first.fed == prompt - result.kept + first.drafted
    assert result.answer == result.fresh


# ----- the record ---------------------------------------------------------------------------

def test_the_record_follows_feeds_crops_and_resets():
    held = HeldTokens()
    held.fed(0, torch.tensor([1, 2, 3]))
    held.fed(3, torch.tensor([4, 5]))
    held.crop(4)
    assert held.ids() == [1, 2, 3, 4] and held.length == 4
    held.fed(2, torch.tensor([9]))  # a forward after a rollback to 2 tokens
    assert held.ids() == [1, 2, 9]
    held.crop(0)
    assert held.ids() == [] and held.length == 0


def test_a_feed_past_the_record_makes_it_unknown_until_the_cache_is_emptied():
    held = HeldTokens()
    held.fed(0, torch.tensor([1, 2]))
    held.fed(5, torch.tensor([7]))  # the model's write position moved by other means
    assert held.length < 0 and held.ids() == []
    held.crop(3)
    assert held.length < 0
    held.clear()
    held.fed(0, torch.tensor([4]))
    assert held.ids() == [4]


class Recorded:
    """A model whose cache length is set apart from its record (another path moved it)."""

    def __init__(self, ids: list[int], cache_length: int):
        self.held = HeldTokens()
        self.held.fed(0, torch.tensor(ids))
        self.cache_length = cache_length


def test_a_record_that_disagrees_with_the_cache_keeps_nothing():
    assert kept_prefix(Recorded([1, 2, 3], 3), [1, 2, 3, 4]) == 3
    assert kept_prefix(Recorded([1, 2, 3], 5), [1, 2, 3, 4]) == 0
    assert kept_prefix(object(), [1, 2]) == 0
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2


# ----- real tiny pairs -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny", "tiny-ngram", "tiny-plain"])
def test_the_next_question_reads_only_its_new_tokens_and_answers_as_from_empty_caches(
        load_tiny, name):
    result = second_answer(load_tiny(name))
    assert result.kept == result.held
    assert_reads_only_the_new_tokens(result)


def others(pair, ids: list[int]) -> list[int]:
    """As many tokens, each another than the one at its place."""
    return [(t + 1) % pair.target.vocab_size for t in ids]


def forget_by_reading_other_tokens(pair, sequence: list[int]) -> None:
    """Another user of the target (a baseline timing) leaves it holding as many tokens,
    all of them others."""
    pair.target.reset()
    pair.target.forward(torch.tensor(others(pair, sequence)))


def rewrite_the_tail(pair, sequence: list[int]) -> None:
    """Another user rolls the target back three tokens and reads three others."""
    pair.target.crop(len(sequence) - 4)
    pair.target.forward(torch.tensor(others(pair, sequence[-4:-1])))


@pytest.mark.parametrize("between, most", [(forget_by_reading_other_tokens, 0),
                                           (rewrite_the_tail, -4)])
def test_a_cache_something_else_used_is_kept_only_as_far_as_it_still_holds_the_prompt(
        load_tiny, between, most):
    pair = load_tiny("tiny")
    result = second_answer(pair, between=between)
    assert result.kept <= (most if most >= 0 else result.held + 1 + most)
    assert_reads_only_the_new_tokens(result)


def test_the_drafts_cache_keeps_its_prefix_too(load_tiny):
    pair = load_tiny("tiny")
    decoder = decoder_for(pair)
    first, _ = committed(decoder, FIRST, Settings(k=3), 14)
    draft = decoder.drafter.model
    held_before = draft.cache_length
    prompt = FIRST + first + EXTRA
    decoder.prepare(prompt, len(prompt))
    assert draft.cache_length == held_before > len(FIRST)


# ----- the chat ------------------------------------------------------------------------------

def greedy_session(pair, turns=()) -> ChatSession:
    session = ChatSession(pair, seed=0)
    session.settings.sampling = dataclasses.replace(session.settings.sampling, temperature=0.0)
    session.conversation.turns = list(turns)
    return session


def reading_and_ids(events) -> tuple[ReadingPrompt, list[int], AnswerDone]:
    reading = next(e for e in events if isinstance(e, ReadingPrompt))
    ids = [s.token_id for e in events if isinstance(e, RoundUpdate) for s in e.spans
           if s.kind != "rejected"]
    return reading, ids, events[-1]


def test_the_chats_second_question_keeps_the_first_exchange_and_its_race_keeps_as_much(
        load_tiny):
    pair = load_tiny("tiny")
    session = greedy_session(pair)
    list(session.answer("hello there", max_new_tokens=12))
    reading, ids, done = reading_and_ids(list(session.answer("and then?", max_new_tokens=12)))
    assert 0 < reading.kept < reading.tokens and done.stats.kept_tokens == reading.kept
    assert session.last_kept == reading.kept

    fresh = greedy_session(pair, session.conversation.turns[:2])
    fresh.keep_limit = 0
    fresh_reading, fresh_ids, _ = reading_and_ids(list(fresh.answer("and then?", 12)))
    assert fresh_reading.kept == 0 and fresh_ids == ids

    list(session.answer("once more", max_new_tokens=12))
    live = session.last_kept
    race, _, _ = reading_and_ids(list(session.replay_last(12)))
    # the caches hold all of the race's prompt now: it keeps only what the answer it races kept
    assert race.kept == live < race.tokens - 1


def read_back_after_another_user(pair, sequence: list[int]) -> None:
    """Another user takes the target, then the conversation is read back while idle."""
    forget_by_reading_other_tokens(pair, sequence)
    assert decoder_for(pair).read(sequence)


@pytest.mark.parametrize("name", ["tiny", "tiny-plain"])
def test_reading_the_conversation_back_while_idle_lets_the_next_question_keep_it(
        load_tiny, name):
    result = second_answer(load_tiny(name), between=read_back_after_another_user)
    assert result.kept == result.held + 1  # read whole: the first answer's last token too
    assert_reads_only_the_new_tokens(result)


def test_a_baseline_timing_between_two_questions_leaves_the_conversation_in_the_caches(
        load_tiny):
    session = greedy_session(load_tiny("tiny"))
    first, _, done = reading_and_ids(list(session.answer("hello there", max_new_tokens=12)))
    assert session.measure_baseline() is not None
    reading, _, _ = reading_and_ids(list(session.answer("and then?", max_new_tokens=12)))
    assert first.tokens < reading.kept
