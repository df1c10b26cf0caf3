"""Drafting with a head that reads the target's features (engine/head_drafter.py), on toy
models: the target keeps [one-hot of the token, its logits] as each position's feature, and
the head guesses the next feature from the previous one (tests/toy.py). Lossless: greedy
output equals plain greedy decoding, and sampled output passes the χ² harness of
tests/lossless.py, which rejects a head drafter that reports a q other than the one it drew
from. The features reach the head from the verify's own forward (no extra target forward),
and the head's cache holds only rows read from real features of committed tokens."""

from __future__ import annotations

import pytest
import torch

from specchat.engine import Decoder, HeadDrafter, Round, SamplingParams, Settings
from specchat.engine import head_drafter as head_module
from specchat.engine import verify as verify_module
from lossless import VOCAB, Harness, exact_table, order_one, verdict
from toy import FeatureTableModel, TableHead, plain_greedy

PROMPTS = [[1, 2], [3, 1, 4, 1, 5], [7], [2, 2, 2, 2, 2, 2]]
PASS, FAIL = 1e-3, 1e-8


def rounds_of(decoder: Decoder, prompt, settings, n, generator=None) -> list[Round]:
    return [e for e in decoder.generate(prompt, settings, n, generator) if isinstance(e, Round)]


def committed(rounds: list[Round]) -> list[int]:
    return [t for r in rounds for t in r.committed]


def head_decoder(target: FeatureTableModel, noise: float = 0.8) -> Decoder:
    return Decoder(target, HeadDrafter(TableHead.of(target, noise), target), eos_ids=set())


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_with_a_head_equals_plain_greedy(k, prompt):
    rounds = rounds_of(head_decoder(FeatureTableModel(seed=0)), prompt, Settings(k=k), 40)
    assert committed(rounds) == plain_greedy(FeatureTableModel(seed=0), prompt, 40)
    assert all(r.drafted for r in rounds[1:-1])  # the first: no features yet; the last: budget


def test_a_head_near_the_target_has_drafts_accepted_and_rejected():
    rounds = rounds_of(head_decoder(FeatureTableModel(seed=1), noise=1.0), [3, 1, 4, 1, 5],
                       Settings(k=4), 80)
    assert any(r.rejected for r in rounds) and any(r.accepted for r in rounds)


def test_the_greedy_test_fails_when_verification_keeps_every_draft(monkeypatch):
    monkeypatch.setattr(verify_module, "leading_true", lambda mask: torch.tensor(mask.numel()))
    rounds = rounds_of(head_decoder(FeatureTableModel(seed=0)), [3, 1, 4], Settings(k=4), 40)
    assert committed(rounds)[:40] != plain_greedy(FeatureTableModel(seed=0), [3, 1, 4], 40)


@pytest.mark.parametrize("k", [2, 4])
def test_a_head_with_the_targets_tables_accepts_every_draft_after_the_first_round(k):
    """The first round has no features yet (the target has not read the prompt): a plain
    step. From then on the head reads the feature of the right position, every time."""
    target = FeatureTableModel(seed=3)
    rounds = rounds_of(head_decoder(target, noise=0.0), [1, 2, 3], Settings(k=k), 6 * (k + 1) + 1)
    assert rounds[0].drafted == 0 and rounds[0].token_kind == "target"
    assert all(r.drafted == k and not r.rejected and r.token_kind == "bonus" for r in rounds[1:])


def reference_rows(target_seed: int, sequence: list[int]) -> list[tuple[list[float], int]]:
    """(feature at p - 1, token p) for every position: what the head must have read."""
    reference = FeatureTableModel(seed=target_seed)
    reference.forward(torch.tensor(sequence))
    features = torch.cat([torch.zeros(1, reference.features.shape[1]), reference.features[:-1]])
    return [(f.tolist(), t) for f, t in zip(features, sequence)]


@pytest.mark.parametrize("k", [1, 3])
def test_the_heads_cache_holds_real_features_of_committed_tokens_only(k):
    target = FeatureTableModel(seed=0)
    head = TableHead.of(target, noise=0.8)
    decoder = Decoder(target, HeadDrafter(head, target), eos_ids=set())
    sequence = [3, 1, 4]
    for event in decoder.generate(list(sequence), Settings(k=k), 30):
        if not isinstance(event, Round):
            continue
        rows = [(f.tolist(), t) for f, t in head.rows]
        assert rows == reference_rows(0, sequence)[: len(rows)]  # read before this round's tokens
        sequence += event.committed
        assert len(rows) <= len(sequence) - 1


def test_the_cache_test_fails_when_guessed_rows_are_kept(monkeypatch):
    monkeypatch.setattr(head_module.HeadDrafter, "rollback", lambda self, length: None)
    with pytest.raises(AssertionError):
        test_the_heads_cache_holds_real_features_of_committed_tokens_only(3)


def forwards_and_rounds(drafter_class) -> tuple[list[int], list[Round], TableHead]:
    target = FeatureTableModel(seed=0)
    head = TableHead.of(target, noise=0.8)
    rounds = rounds_of(Decoder(target, drafter_class(head, target), set()), [3, 1, 4],
                       Settings(k=3), 40)
    return target.forward_calls, rounds, head


def test_the_features_reach_the_head_with_no_extra_target_forward():
    """One target forward per round, as with any drafter: the verify's (the first round's
    carries the prompt); the head reads what those forwards kept: one forward per draft, and
    one when the answer ends, of the committed tokens it has not read (`settle`), after which
    it holds a row for every one."""
    forwards, rounds, head = forwards_and_rounds(HeadDrafter)
    assert forwards == [3] + [r.drafted + 1 for r in rounds[1:]]
    assert len(head.forward_calls) == sum(r.drafted for r in rounds) + 1
    assert len(head.rows) == 3 + sum(len(r.committed) for r in rounds)


class RecomputingHeadDrafter(HeadDrafter):
    """A drafter that gets its features by running the target again over the committed
    tokens it lacks (then rolls the target back): right drafts, wasted target work."""

    def propose(self, sequence, k, params, generator, should_stop=lambda: False, committed=None):
        start = self.source.cache_length
        if start < sequence.shape[0] - 1:
            self.source.forward(sequence[start:-1], keep=1)
            self.target_fed(start)
            self.source.crop(start)
        return super().propose(sequence, k, params, generator, should_stop, committed)


def test_the_forward_count_sees_a_drafter_that_runs_the_target_itself():
    forwards, rounds, _ = forwards_and_rounds(RecomputingHeadDrafter)
    assert forwards != [3] + [r.drafted + 1 for r in rounds[1:]]


def test_a_long_prompts_catch_up_chunks_give_their_features_too(monkeypatch):
    from specchat.engine import decoder as decoder_module

    monkeypatch.setattr(decoder_module, "PREFILL_FIRST_CHUNK", 4)
    target = FeatureTableModel(seed=0)
    head = TableHead.of(target, noise=0.0)
    prompt = [1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    rounds = rounds_of(Decoder(target, HeadDrafter(head, target), set()), prompt,
                       Settings(k=3), 20)
    assert committed(rounds) == plain_greedy(FeatureTableModel(seed=0), prompt, 20)
    reference = reference_rows(0, prompt + committed(rounds))
    assert [(f.tolist(), t) for f, t in head.rows] == reference[: len(head.rows)]


def test_a_target_without_features_decodes_plain():
    from toy import TableModel

    target = TableModel(seed=0)
    head = TableHead.of(FeatureTableModel(seed=0))
    rounds = rounds_of(Decoder(target, HeadDrafter(head, target), set()), [1, 2],
                       Settings(k=3), 10)
    assert committed(rounds) == plain_greedy(TableModel(seed=0), [1, 2], 10)
    assert all(r.drafted == 0 for r in rounds) and not head.forward_calls


def test_a_round_stopped_mid_draft_leaves_no_guessed_row():
    target = FeatureTableModel(seed=0)
    head = TableHead.of(target, noise=0.8)
    decoder = Decoder(target, HeadDrafter(head, target), set())
    calls = [0]

    def should_stop() -> bool:
        calls[0] += 1
        return calls[0] > 12

    events = list(decoder.generate([3, 1, 4], Settings(k=4), 40, should_stop=should_stop))
    produced = sum(len(e.committed) for e in events if isinstance(e, Round))
    assert events[-1].stop_reason == "stopped"
    assert head.cache_length <= 3 + produced and target.cache_length <= 3 + produced - 1


# --- sampled answers through the χ² harness ------------------------------------------------

T1 = SamplingParams(temperature=1.0)
TOP_P = SamplingParams(temperature=1.5, top_p=0.8)
ROUNDS = 1000


pytestmark = pytest.mark.usefixtures("one_thread")


def sampled_case(k: int, params: SamplingParams, seed: int = 1):
    target = order_one(FeatureTableModel(VOCAB, seed=5, scale=1.0))
    head = TableHead.of(target, noise=0.5)
    harness = Harness(Decoder(target, HeadDrafter(head, target), set()), Settings(k, params),
                      seed=seed)
    return harness.run(ROUNDS), exact_table(target, params)


@pytest.mark.parametrize("k, params", [(1, T1), (4, T1), (4, TOP_P)])
def test_sampled_answers_with_a_head_follow_the_target_distribution(k, params):
    sample, table = sampled_case(k, params)
    result = verdict(sample, table)
    assert result.pvalue > PASS, str(result)
    drafted, accepted = sample.stats.position_drafted, sample.stats.position_accepted
    assert len(drafted) == k and drafted[-1] > 0.3 * sample.stats.rounds  # answers of 8 tokens
    assert accepted[k - 1:] >= [20]  # the bonus path ran


def greedy_draws_reported_as_sampled(logits, params, generator):
    """A broken head drafter: it proposes the argmax but reports the q it should have drawn
    from."""
    from specchat.engine.sampling import to_probs
    from specchat.engine.verify import row_argmax

    q = None if params.greedy else to_probs(logits[-1], params)
    return row_argmax(logits[-1:]), q


def test_the_harness_rejects_a_head_drafter_that_reports_another_q(monkeypatch):
    monkeypatch.setattr(head_module.ModelDrafter, "_choose",
                        staticmethod(greedy_draws_reported_as_sampled))
    sample, table = sampled_case(4, T1)
    result = verdict(sample, table)
    assert result.pvalue < FAIL, f"the broken head drafter was not caught: {result}"
