"""Speculation with a draft of another tokenizer (chat/cross/) through the real `Decoder`:

- greedy: the output is the target's greedy output token for token, whatever the draft;
- sampling (token-level intersection): committed tokens follow the target's processed
  distribution by the χ² harness of tests/lossless.py, and a deliberately lossy variant
  (q read before the draft was restricted to the shared tokens) fails it;
- alignment: a draft token spanning two target tokens, a target token spanning two draft
  tokens, byte-fallback tokens completing a character the target began, whitespace
  merges, special tokens, an EOS written by the draft; each verified and shown as it
  lines up (chat/cross/text.py's "one", "merged", "split").

The tokenizers are chosen by hand (tests/cross_world.py's `ToyTokenizer`) so each case is
exactly the one named; scripted models make the draft and the target agree where their
texts do.
"""

from __future__ import annotations

import pytest
import torch

from specchat.chat.cross import drafter as drafter_module
from specchat.chat.cross.drafter import CrossTokenizerDrafter, restricted
from specchat.chat.cross.pieces import TokenPieces
from specchat.chat.cross.vocabulary import CrossVocabulary
from specchat.engine import (Decoder, Finished, LookupFirstDrafter, NgramDrafter, Round,
                             SamplingParams, Settings)
from specchat.engine.sampling import sample, to_probs
from cross_world import ScriptModel, ToyTokenizer, toy_pair
from lossless import VOCAB, Harness, exact_table, order_one, verdict
from toy import TableModel, plain_greedy

PASS, FAIL = 1e-3, 1e-8


def cross(target_tokenizer, draft_tokenizer, draft_model, target_eos=(), target_columns=None):
    vocabulary = CrossVocabulary(TokenPieces(draft_tokenizer), TokenPieces(target_tokenizer),
                                 draft_model.vocab_size, target_columns or len(target_tokenizer))
    return CrossTokenizerDrafter(draft_model, vocabulary, set(target_eos))


def rounds_of(decoder: Decoder, prompt: list[int], k: int, n: int = 40, params=None, seed=0):
    settings = Settings(k=k, sampling=params or SamplingParams())
    events = list(decoder.generate(prompt, settings, n, torch.Generator().manual_seed(seed)))
    return [e for e in events if isinstance(e, Round)], events[-1]


# --- greedy: the target's output, token for token -------------------------------------

WORDS_T = [b"the", b" cat", b" sat", b" on", b" mat", b" th", b"e", b" a", b"t", b"\n"]
WORDS_D = [b"th", b"e cat", b" s", b"at", b" on the", b" m", b"at\n", b" a", b"t"]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_cross_tokenizer_output_is_the_target_greedy_output(k, seed):
    target_tokenizer, draft_tokenizer = toy_pair(WORDS_T, WORDS_D)
    target = TableModel(len(target_tokenizer), seed=seed)
    draft = TableModel(len(draft_tokenizer), seed=seed + 10)
    decoder = Decoder(target, cross(target_tokenizer, draft_tokenizer, draft), set())
    prompt = target_tokenizer.encode("the cat")
    rounds, _ = rounds_of(decoder, prompt, k)
    produced = [t for r in rounds for t in r.committed]
    assert produced == plain_greedy(TableModel(len(target_tokenizer), seed=seed), prompt, 40)
    assert sum(r.drafted for r in rounds) > 0


# --- sampling: the target's distribution, by token-level intersection ---------------------

TARGET_PIECES = [b"a", b"b", b"c", b"ab"]
DRAFT_PIECES = [b"a", b"b", b"c", b"ba", b"abc"]
"""Four target tokens (the harness's vocabulary); the draft has three of them and two of
its own ("ba", "abc") outside the intersection, which it may never propose."""


def tli_decoder(eos: frozenset = frozenset()):
    target = order_one(TableModel(VOCAB, seed=5, scale=1.0))
    draft = TableModel(len(DRAFT_PIECES), seed=7)
    draft.t1[:, :VOCAB - 1] = target.t1[:VOCAB - 1, :VOCAB - 1].repeat(2, 1)[:len(DRAFT_PIECES)]
    drafter = cross(ToyTokenizer(TARGET_PIECES), ToyTokenizer(DRAFT_PIECES), draft, eos)
    return target, Decoder(target, drafter, set(eos))


CASES = {"temperature 1": (SamplingParams(temperature=1.0), 4),
         "top-k 2": (SamplingParams(temperature=1.0, top_k=2), 3),
         "temperature 1.5, top-p 0.8": (SamplingParams(temperature=1.5, top_p=0.8), 4)}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", CASES)
def test_sampled_cross_tokenizer_answers_follow_the_target_distribution(name):
    params, k = CASES[name]
    target, decoder = tli_decoder()
    sample_ = Harness(decoder, Settings(k, params), seed=3).run(1000)
    result = verdict(sample_, exact_table(target, params))
    assert result.pvalue > PASS, f"{name}: {result}"
    assert sample_.stats.position_accepted[k - 1:] and sample_.stats.position_accepted[k - 1] > 20
    if params.top_k == 0:
        assert sum(c[3] for c in sample_.by_round_index.values()) > 0, \
            "the target's own token outside the intersection must still be produced"


def test_sampled_answers_end_at_an_eos_the_draft_proposed_and_keep_the_distribution():
    params = SamplingParams(temperature=1.0)
    target, decoder = tli_decoder(eos=frozenset({2}))
    sample_ = Harness(decoder, Settings(3, params), seed=4).run(1000)
    assert verdict(sample_, exact_table(target, params), {2}).pvalue > PASS
    assert sample_.eos_in_draft > 20 and sample_.reasons["eos"] > 0


def q_before_restriction(self, logits, params, generator):
    """The mutant: samples among the shared tokens, but reports the draft's distribution
    before it was restricted to them (a q that is not the one the token was drawn from)."""
    token = int(sample(restricted(logits, self.vocabulary, params), generator))
    raw = to_probs(logits[:self.vocabulary.draft_columns], params)
    return token, self.vocabulary.target_row(raw)


def test_a_q_read_before_the_restriction_is_caught_by_the_distribution_test(monkeypatch):
    monkeypatch.setattr(drafter_module.CrossTokenizerDrafter, "_draw", q_before_restriction)
    params = SamplingParams(temperature=1.0)
    target, decoder = tli_decoder()
    result = verdict(Harness(decoder, Settings(4, params), seed=3).run(1000),
                     exact_table(target, params))
    assert result.pvalue < FAIL, f"the lossy variant passed: {result}"


@pytest.mark.parametrize("lossless", [True, False], ids=["lookup first", "copies on trust"])
def test_prompt_lookup_first_over_a_cross_tokenizer_draft_keeps_the_distribution(lossless):
    """`lookup = true` on a draft of another tokenizer: the lookup proposes wherever it finds
    a match (COPY_SPAN 1), TLI elsewhere; the target's distribution holds, and a variant
    that takes copied tokens on trust (test_engine_lossless.py) fails."""
    from test_engine_lossless import LOOKUP_ROUNDS, LookupTakenOnTrust

    params = SamplingParams(temperature=1.0)
    target, plain = tli_decoder()
    lookup_class = LookupFirstDrafter if lossless else LookupTakenOnTrust
    drafter = lookup_class(plain.drafter, NgramDrafter(2, 1, 4, window=False))
    drafter.COPY_SPAN = 1
    sample_ = Harness(Decoder(target, drafter, set()), Settings(4, params), seed=3).run(
        LOOKUP_ROUNDS)
    pvalue = verdict(sample_, exact_table(target, params)).pvalue
    assert pvalue > PASS if lossless else pvalue < FAIL, pvalue


# --- alignment edge cases, with scripted models ---------------------------------------------

PROMPT = b"Q:"


def scripted(target_pieces, draft_pieces, script: bytes, k: int = 3, detour=None,
             target_specials=None, draft_specials=None):
    """(rounds, the finish, the drafter's alignment per round, target tokenizer) of a
    target and a draft that both write `script` (the draft with its `detour`, if given)."""
    specials_t = {0: "<eos>", **(target_specials or {})}
    specials_d = {0: "</s>", **(draft_specials or {})}
    target_tokenizer, draft_tokenizer = toy_pair([b"<eos>", PROMPT, *target_pieces],
                                                 [b"</s>", PROMPT, *draft_pieces],
                                                 specials_t, specials_d, 0, 0)
    target = ScriptModel(target_tokenizer, PROMPT, script, eos=0)
    draft = ScriptModel(draft_tokenizer, PROMPT, script, eos=0, detour=detour)
    drafter = cross(target_tokenizer, draft_tokenizer, draft, {0})
    decoder = Decoder(target, drafter, {0})
    rounds, alignments, done = [], [], None
    for event in decoder.generate(target_tokenizer.encode(PROMPT.decode()), Settings(k=k), 40):
        if isinstance(event, Finished):
            done = event
            break
        rounds.append(event)
        alignments.append(drafter.alignment[:event.drafted])
    plain = plain_greedy(ScriptModel(target_tokenizer, PROMPT, script, eos=0),
                         target_tokenizer.encode(PROMPT.decode()), 40, eos={0})
    assert [t for r in rounds for t in r.committed] == plain, "not the target's greedy output"
    return rounds, done, alignments, target_tokenizer


def pieces_of(tokenizer, ids) -> list[bytes]:
    return [tokenizer.pieces[i] for i in ids]


def test_a_draft_token_spanning_two_target_tokens_is_split_and_accepted():
    rounds, done, alignments, tokenizer = scripted([b" hel", b"lo", b" you"], [b" hello", b" you"],
                                                   b" hello you")
    assert pieces_of(tokenizer, rounds[0].accepted)[:2] == [b" hel", b"lo"]
    assert alignments[0][:2] == ("split", "split") and done.stop_reason == "eos"


def test_a_target_token_spanning_two_draft_tokens_is_merged_and_accepted():
    rounds, _, alignments, tokenizer = scripted([b" world", b" is"], [b" wor", b"ld", b" is"],
                                                b" world is")
    assert pieces_of(tokenizer, rounds[0].accepted)[:1] == [b" world"]
    assert alignments[0][0] == "merged" and not rounds[0].rejected


def test_whitespace_merged_by_the_target_is_one_token_over_two_draft_newlines():
    rounds, _, alignments, tokenizer = scripted([b"one", b"\n\n", b"two"], [b"one", b"\n", b"two"],
                                                b"one\n\ntwo")
    assert pieces_of(tokenizer, rounds[0].accepted) == [b"one", b"\n\n", b"two"]
    assert alignments[0] == ("one", "merged", "one")


def test_byte_fallback_tokens_complete_a_character_the_target_began():
    """The target spells "é" as two byte tokens and commits the first at a round's end: the
    draft, which read only whole characters, must propose the second byte first."""
    script = b" caf\xc3\xa9 ok"
    rounds, done, alignments, tokenizer = scripted([b" caf", b" ok"], [b" caf\xc3\xa9", b" ok"],
                                                   script, k=1)
    committed = [t for r in rounds for t in r.committed]
    assert pieces_of(tokenizer, committed)[:3] == [b" caf", b"\xc3", b"\xa9"]
    ended_inside = [i for i, r in enumerate(rounds)
                    if tokenizer.pieces[r.committed[-1]] == b"\xc3"]
    assert ended_inside, "no round ended inside the character: the case did not happen"
    following = rounds[ended_inside[0] + 1]
    assert pieces_of(tokenizer, following.accepted)[:1] == [b"\xa9"], \
        "the missing byte was not proposed"
    assert done.stop_reason == "eos"


def test_special_tokens_map_to_specials_of_the_same_content_and_text_otherwise():
    """`<|im_end|>` is special in both (mapped); `<|im_start|>`, special in the target only,
    reaches the draft as text: the draft reads it in its own pieces."""
    specials = {50: "<|im_end|>"}
    target_pieces = [b"hi", b"<|im_start|>"] + [b"x"] * 47 + [b"<|im_end|>"]
    target_tokenizer, draft_tokenizer = toy_pair(target_pieces, [b"hi", b"<|im_end|>"],
                                                 {1: "<|im_start|>", **specials},
                                                 {1: "<|im_end|>"})
    vocabulary = CrossVocabulary(TokenPieces(draft_tokenizer), TokenPieces(target_tokenizer),
                                 len(draft_tokenizer), len(target_tokenizer))
    assert int(vocabulary.to_target[1]) == 50
    prompt = target_tokenizer.encode("<|im_start|>hi")
    assert prompt[0] == 1
    draft = ScriptModel(draft_tokenizer, b"<|im_start|>hi", b"hi", eos=1)
    drafter = CrossTokenizerDrafter(draft, vocabulary, {50})
    drafter.context.sync(prompt)
    assert draft_tokenizer.decode(drafter.context.ids) == "<|im_start|>hi"
    proposal = drafter.propose(torch.tensor(prompt), 3, SamplingParams(), None)
    assert proposal.tokens.tolist() == [0, 50], "hi, then the draft's <|im_end|> as the target's"


def test_an_eos_the_draft_writes_ends_the_answer_and_nothing_follows_it():
    """The draft's `</s>` has no target token of its content: it stands for the target's EOS."""
    rounds, done, alignments, tokenizer = scripted([b" bye"], [b" bye"], b" bye", k=4)
    assert done.stop_reason == "eos" and rounds[-1].token is None
    assert pieces_of(tokenizer, rounds[-1].accepted)[-1] == b"<eos>"


def test_a_draft_that_parts_from_the_target_is_rejected_and_reads_the_target_text_after():
    rounds, _, _, tokenizer = scripted([b" one", b" two", b" three"],
                                       [b" one", b" too", b" three"],
                                       b" one two three", detour=(b" one", b" too"))
    assert any(r.rejected for r in rounds)
    assert any(b" three" in pieces_of(tokenizer, r.accepted) for r in rounds), \
        "after the correction the draft must follow the target's text"


def test_the_draft_cache_holds_exactly_the_tokens_fed_to_it_after_every_round():
    target_tokenizer, draft_tokenizer = toy_pair(WORDS_T, WORDS_D)
    target = TableModel(len(target_tokenizer), seed=3)
    draft = TableModel(len(draft_tokenizer), seed=4)
    drafter = cross(target_tokenizer, draft_tokenizer, draft)
    decoder = Decoder(target, drafter, set())
    for event in decoder.generate(target_tokenizer.encode("the cat"), Settings(k=3), 30):
        context = drafter.context
        assert draft.fed == context.ids[:context.fed], "the draft's cache is not its tokens"
        assert draft_tokenizer.decode(context.ids[:context.verified]).encode() == \
            bytes(context.text[:context.spelled])
