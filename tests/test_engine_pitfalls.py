"""Each pitfall of docs/design.md §3 has a test: the processed q reported for the ratio, prefix
acceptance, the draft's missing last token after a full accept, EOS inside a draft,
cache lengths after every round (also after a stop), and the token budget."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, Round, SamplingParams, Settings
from specchat.engine.drafters import Proposal, find_continuation
from toy import TableModel, plain_greedy


class ScriptedDrafter:
    """Proposes fixed tokens (deterministic q), to put the engine in exact situations."""

    max_cache_lag = 0

    def __init__(self, script: list[list[int]]):
        self.script = list(script)

    def reset(self):
        pass

    def propose(self, sequence, k, params, generator, should_stop=lambda: False, committed=None):
        tokens = self.script.pop(0)[:k] if self.script else []
        return Proposal(torch.tensor(tokens, dtype=torch.long), None)

    def rollback(self, committed_length):
        pass


def rounds_of(decoder, prompt, settings, n, **kwargs):
    return list(decoder.generate(prompt, settings, n, **kwargs))


class ConstantModel:
    """A CausalModel whose logits are the same row after every token."""

    def __init__(self, logits: list[float]):
        self.row = torch.tensor(logits)
        self.vocab_size, self.device, self.fed = len(logits), torch.device("cpu"), []

    @property
    def cache_length(self) -> int:
        return len(self.fed)

    def forward(self, ids, keep=1):
        self.fed += ids.tolist()
        return self.row.expand(keep, -1).clone()

    def crop(self, length):
        del self.fed[length:]

    def reset(self):
        self.fed = []


def test_the_draft_reports_the_processed_q_it_sampled_from():
    """Top-k 2 over logits (1.0, 0.9, 0.5, 0.5): q = (e / (e + e^0.9), e^0.9 / (e + e^0.9), 0, 0),
    not the raw softmax (0.313, 0.283, 0.202, 0.202). The verify's ratio p / q is only
    right with this q (the harness in test_engine_lossless rejects a raw q end to end)."""
    params = SamplingParams(temperature=1.0, top_k=2)
    drafter = ModelDrafter(ConstantModel([1.0, 0.9, 0.5, 0.5]))
    generator = torch.Generator().manual_seed(0)
    proposal = drafter.propose(torch.tensor([1, 2]), 3, params, generator)
    assert proposal.probs.tolist() == [pytest.approx([0.5249792, 0.4750208, 0.0, 0.0])] * 3
    draws = []
    for _ in range(4000):
        drafter.reset()
        draws += drafter.propose(torch.tensor([1, 2]), 1, params, generator).tokens.tolist()
    draws = torch.tensor(draws)
    assert set(draws.tolist()) == {0, 1}
    assert float((draws == 0).float().mean()) == pytest.approx(0.525, abs=0.03)


def test_acceptance_counts_only_the_prefix_before_the_first_rejection():
    target = TableModel(seed=0)
    truth = plain_greedy(TableModel(seed=0), [1, 2], 3)
    wrong = (truth[0] + 1) % target.vocab_size
    decoder = Decoder(target, ScriptedDrafter([[wrong, truth[1], truth[2]]]), eos_ids=set())
    first = rounds_of(decoder, [1, 2], Settings(k=3), 10)[0]
    assert first.accepted == ()
    assert first.rejected == (wrong, truth[1], truth[2])  # later matches are not "accepted"
    assert first.token == truth[0] and first.token_kind == "resampled"


def test_draft_cache_holds_exactly_the_committed_prefix_after_every_round():
    target = TableModel(seed=3)
    draft = TableModel(seed=9).copy_tables_from(target)  # self-draft: every round fully accepted
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    sequence = [1, 2]
    for event in decoder.generate(list(sequence), Settings(k=3), 20):
        if isinstance(event, Round):
            sequence += list(event.committed)
            assert target.fed == sequence[:-1]
            assert draft.fed == sequence[: len(draft.fed)]
            assert len(draft.fed) == len(sequence) - 2  # its own last draft not fed yet


def test_draft_feeds_its_missing_last_draft_before_proposing_again():
    target = TableModel(seed=3)
    draft = TableModel(seed=9).copy_tables_from(target)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    list(decoder.generate([1, 2], Settings(k=3), 8))
    # round 1: the prompt with the first step, then two one-token steps; round 2 starts
    # by feeding the last draft (never fed after the full accept) with the bonus token
    assert draft.forward_calls[:6] == [2, 1, 1, 2, 1, 1]


def test_eos_inside_a_draft_ends_the_answer_there():
    target = TableModel(seed=0)
    truth = plain_greedy(TableModel(seed=0), [1, 2], 4)
    eos = truth[1]
    decoder = Decoder(target, ScriptedDrafter([[truth[0], eos, 5, 6]]), eos_ids={eos})
    events = rounds_of(decoder, [1, 2], Settings(k=4), 50)
    first, finished = events[0], events[-1]
    assert first.accepted == (truth[0], eos)
    assert first.rejected == () and first.token is None
    assert isinstance(finished, Finished) and finished.stop_reason == "eos"
    assert finished.new_tokens == 2
    assert target.fed == [1, 2, truth[0]]  # nothing after the EOS reached the target's cache


def test_eos_from_the_target_ends_the_answer():
    truth = plain_greedy(TableModel(seed=0), [1, 2], 6)
    eos = truth[3]
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids={eos})
    committed = [t for e in rounds_of(decoder, [1, 2], Settings(k=2), 50)
                 if isinstance(e, Round) for t in e.committed]
    assert committed == truth[: truth.index(eos) + 1]


def test_stop_is_honoured_within_one_round_and_leaves_caches_committed():
    target, draft = TableModel(seed=0), TableModel(seed=1)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    rounds = 0

    def should_stop():
        return rounds >= 2

    sequence = [1, 2]
    for event in decoder.generate([1, 2], Settings(k=4), 100, should_stop=should_stop):
        if isinstance(event, Round):
            rounds += 1
            sequence += list(event.committed)
        else:
            assert event.stop_reason == "stopped"
    assert rounds == 2
    assert target.fed == sequence[:-1]
    assert draft.fed == sequence[: len(draft.fed)] and len(draft.fed) >= len(sequence) - 2


def test_stop_in_the_middle_of_drafting_cancels_the_round_and_rolls_the_draft_back():
    target, draft = TableModel(seed=0), TableModel(seed=1)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    calls = 0

    def should_stop():
        nonlocal calls
        calls += 1
        return calls > 3  # true partway through the first round's drafting

    events = list(decoder.generate([1, 2, 3], Settings(k=6), 100, should_stop=should_stop))
    assert len(events) == 1 and events[0].stop_reason == "stopped"
    assert target.fed == []  # the cancelled round never reached the target
    assert draft.fed == [1, 2]  # rolled back to the committed tokens but the newest


def test_stop_during_a_long_prompts_prefill_is_honoured_within_one_chunk():
    """A long prompt is fed in chunks with a stop check between them (one forward of the
    whole prompt could not be stopped): asked to stop after two chunks, the answer ends
    there, no cache past the committed tokens."""
    target, draft = TableModel(seed=0), TableModel(seed=1)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    prompt = [i % 8 for i in range(5000)]
    events = rounds_of(decoder, prompt, Settings(k=4), 50,
                       should_stop=lambda: len(target.forward_calls) >= 2)
    assert [type(e) for e in events] == [Finished] and events[0].stop_reason == "stopped"
    assert len(target.forward_calls) == 2 and sum(target.forward_calls) < len(prompt)
    assert target.fed == prompt[:sum(target.forward_calls)] and draft.fed == []


def test_a_chunked_prefill_changes_no_token_and_a_short_prompt_takes_one_forward():
    from specchat.engine.decoder import PREFILL_FIRST_CHUNK

    target, draft = TableModel(seed=0), TableModel(seed=1)
    draft.copy_tables_from(target)
    prompt = [i * 3 % 8 for i in range(3000)]
    committed = [t for e in rounds_of(Decoder(target, ModelDrafter(draft), eos_ids=set()),
                                      prompt, Settings(k=4), 40)
                 if isinstance(e, Round) for t in e.committed]
    assert committed == plain_greedy(target, prompt, 40)
    for model in (target, draft):  # chunks, then the rest with the first round's forward
        assert model.forward_calls[0] == PREFILL_FIRST_CHUNK and len(model.forward_calls) > 3
    short = TableModel(seed=0)
    rounds_of(Decoder(short, None, eos_ids=set()), [1, 2, 3] * 20, Settings(k=0), 3)
    assert short.forward_calls[0] == 60  # the whole prompt in the first round's one forward


def test_prefill_chunks_shrink_to_half_a_second_of_a_slow_models_work_and_grow_on_a_fast_one():
    """Esc lands within about PREFILL_CHUNK_S however slow the model: each catch-up chunk is
    sized from the last one's time (growing at most 4x a step, within PREFILL_CHUNK_RANGE)."""
    from specchat.engine.decoder import PREFILL_CHUNK_RANGE, PREFILL_FIRST_CHUNK, next_chunk

    def chunks(tokens_per_s: float, n: int = 6) -> list[int]:
        sizes = [PREFILL_FIRST_CHUNK]
        for _ in range(n):
            sizes.append(next_chunk(sizes[-1], sizes[-1] / tokens_per_s))
        return sizes

    slow = chunks(50.0)  # one CPU thread on the 1.5B Qwen target
    assert slow[1:] == [25] * 6 and 25 / 50.0 == 0.5
    fast = chunks(100_000.0)
    assert fast[:4] == [64, 256, 1024, 1024] and max(fast) == PREFILL_CHUNK_RANGE[1]
    assert chunks(1.0)[-1] == PREFILL_CHUNK_RANGE[0]  # never below the floor


def test_max_new_tokens_is_never_exceeded_and_drafts_shrink_to_fit():
    target = TableModel(seed=3)
    draft = TableModel(seed=9).copy_tables_from(target)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    events = rounds_of(decoder, [1, 2], Settings(k=4), 7)
    rounds = [e for e in events if isinstance(e, Round)]
    assert sum(len(e.committed) for e in rounds) == 7
    assert [e.k for e in rounds] == [4, 1]
    assert events[-1].stop_reason == "max_tokens"


def test_ngram_without_a_match_costs_one_token_verify():
    target = TableModel(seed=0)
    decoder = Decoder(target, NgramDrafter(max_ngram=3, min_ngram=3), eos_ids=set())
    first, second = [e for e in rounds_of(decoder, [1, 2, 3], Settings(k=4), 2) if isinstance(e, Round)]
    assert first.drafted == second.drafted == 0 and second.token_kind == "target"
    assert target.forward_calls == [3, 1]  # the prompt, then a single-token verify


def test_ngram_proposes_what_followed_the_latest_match():
    ids = [5, 6, 7, 1, 5, 6, 8, 9, 5, 6]
    assert find_continuation(ids, 3, max_ngram=2, min_ngram=1) == [8, 9, 5]
    assert find_continuation([1, 2, 3], 3, max_ngram=2, min_ngram=1) == []


def test_changing_k_applies_from_the_next_round():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    settings = Settings(k=2)
    seen = []
    for event in decoder.generate([1, 2], settings, 60):
        if isinstance(event, Round):
            seen.append(event.k)
            settings.k = 5
    assert seen[:4] == [2, 5, 5, 5]


def test_ngram_proposal_length_doubles_on_full_accept_and_shrinks_on_rejection():
    drafter = NgramDrafter(max_ngram=2, min_ngram=1, start_length=2)
    pattern = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2])
    params = SamplingParams()
    first = drafter.propose(pattern, 8, params, None)
    assert first.tokens.tolist() == [3, 4]
    drafter.rollback(len(pattern) + 3)  # both accepted, plus a bonus token
    assert len(drafter.propose(pattern, 8, params, None)) == 4
    drafter.rollback(len(pattern) + 2)  # one of four accepted
    assert len(drafter.propose(pattern, 8, params, None)) == 2
    drafter.rollback(len(pattern) + 1)  # none accepted
    assert len(drafter.propose(pattern, 8, params, None)) == 1


def test_ngram_proposal_follows_a_long_copy_even_after_a_rejection():
    drafter = NgramDrafter(max_ngram=2, min_ngram=1, start_length=2)
    copied = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    params = SamplingParams()
    short_match = torch.tensor([7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 5, 6])  # matches only "5 6"
    assert len(drafter.propose(short_match, 8, params, None)) == 2
    drafter.rollback(len(short_match) + 1)  # none accepted: the window drops to 1
    assert len(drafter.propose(short_match, 8, params, None)) == 1
    drafter.rollback(len(short_match) + 1)
    long_match = torch.tensor([7, *copied, 0, *copied[:6]])  # six tokens copied so far
    assert drafter.propose(long_match, 8, params, None).tokens.tolist() == [7, 8, 9, 0, 1]
    assert len(drafter.propose(long_match, 3, params, None)) == 3  # never beyond k


def test_without_a_drafter_rounds_report_k_zero_and_read_live_sampling():
    decoder = Decoder(TableModel(seed=0), None, eos_ids=set())
    settings = Settings(k=5)
    rounds = []
    for event in decoder.generate([1, 2], settings, 20, torch.Generator().manual_seed(0)):
        if isinstance(event, Round):
            rounds.append(event)
            settings.sampling = SamplingParams(temperature=50.0)  # near-uniform from round 2
    tokens = [e.token for e in rounds]
    greedy = plain_greedy(TableModel(seed=0), [1, 2], 20)
    assert [e.k for e in rounds] == [0] * 20
    assert tokens[0] == greedy[0] and tokens != greedy
