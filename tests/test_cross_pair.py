"""A draft of another tokenizer, loaded through the real loader on tiny random models: the
pair loads with the draft's own tokenizer, greedy speculative output equals target-only
output token for token on every backend, fates are shown on the target's tokens with
their alignment to the draft's, and `run --jsonl` says it per round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.chat.events import RoundUpdate
from specchat.chat.session import ChatSession
from specchat.engine.params import SamplingParams

PROMPTS = ["hello there", "The quick brown fox", "def add(a, b):",
           "Caf\u00e9 \u65e5\u672c\u8a9e \U0001f600"]


@pytest.fixture(scope="module")
def config(tmp_path_factory, tiny_config) -> Path:
    """Pairs of the tiny byte-level target with drafts of other tokenizers: a SentencePiece
    style one (folder, torch), a byte-level one with other merges (folder), and GGUF forms
    of the target and that byte-level draft (llama.cpp, int8)."""
    from cross_world import build_metaspace_tokenizer
    from tiny import build_model, build_tokenizer, save_tiny
    from tiny_gguf import write_gguf

    root = tmp_path_factory.mktemp("cross")
    target = tiny_config.parent / "target"
    metaspace = save_tiny(root / "metaspace", build_metaspace_tokenizer(), 1, 32, seed=4)
    other_tokenizer = build_tokenizer(vocab_size=290)
    other = save_tiny(root / "bytelevel", other_tokenizer, 1, 32, seed=5)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    write_gguf(AutoModelForCausalLM.from_pretrained(target), AutoTokenizer.from_pretrained(target),
               root / "target.gguf")
    write_gguf(AutoModelForCausalLM.from_pretrained(other), other_tokenizer, root / "other.gguf")
    pairs = {"metaspace": (target, metaspace, "torch"), "bytelevel": (target, other, "torch"),
             "llama": (root / "target.gguf", root / "other.gguf", "llama.cpp"),
             "int8": (root / "target.gguf", root / "other.gguf", "int8"),
             "same": (target, tiny_config.parent / "draft", "torch")}
    text = "".join(f'[pairs.{name}]\ntarget = "{t}"\ndraft = "{d}"\nbackend = "{backend}"\n'
                   f'k = 3\ndtype = "float32"\n\n' for name, (t, d, backend) in pairs.items())
    text += (f'[pairs.forced]\ntarget = "{target}"\ndraft = "{tiny_config.parent / "draft"}"\n'
             'k = 3\ndtype = "float32"\nretokenize = "always"\n')
    text += (f'\n[pairs.lookup]\ntarget = "{target}"\ndraft = "{other}"\nbackend = "torch"\n'
             'k = 3\ndtype = "float32"\nlookup = true\nngram_n = 1\n')
    (root / "models.toml").write_text(text)
    return root / "models.toml"


@pytest.fixture(scope="module")
def loaded(config):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    cache = {}

    def load(name: str):
        if name == "int8":
            from specchat.models.backend_int8 import int8_support

            if not int8_support().usable:
                pytest.skip(int8_support().why)
        if name not in cache:
            cache[name] = load_pair(load_catalog(config).get(name))
        return cache[name]

    return load


def answer(pair, prompt: str, speculate: bool = True, params: SamplingParams | None = None,
           seed: int = 1, n: int = 24):
    session = ChatSession(pair, seed=seed)
    session.speculate = speculate
    if params is not None:
        session.settings.sampling = params
    events = list(session.answer(prompt, max_new_tokens=n))
    return [e for e in events if isinstance(e, RoundUpdate)], events[-1]


def committed_ids(updates) -> list[int]:
    return [s.token_id for u in updates for s in u.spans if s.kind != "rejected"]


@pytest.mark.parametrize("name", ["metaspace", "bytelevel", "llama", "int8"])
def test_greedy_cross_tokenizer_output_equals_target_only_token_for_token(loaded, name):
    pair = loaded(name)
    assert pair.draft_tokenizer is not None, "a draft of another tokenizer keeps its own"
    drafted = 0
    for prompt in PROMPTS:
        spec, done = answer(pair, prompt)
        plain, _ = answer(pair, prompt, speculate=False)
        assert committed_ids(spec) == committed_ids(plain), f"{name}: {prompt!r}"
        drafted += done.stats.drafted
    assert drafted > 0, "the draft proposed nothing: the test would prove nothing"


@pytest.mark.parametrize("name", ["metaspace", "bytelevel"])
def test_fates_are_on_target_tokens_with_their_alignment(loaded, name):
    pair = loaded(name)
    for prompt in PROMPTS:
        updates, done = answer(pair, prompt)
        for update in updates:
            drafts = update.accepted + update.rejected
            assert all(s.alignment in ("one", "merged", "split") for s in drafts)
            assert update.token is None or update.token.alignment == ""
        text = "".join(s.text for s in done.spans if s.kind != "rejected")
        assert text == pair.tokenizer.decode(committed_ids(updates), skip_special_tokens=True)


def test_prompt_lookup_first_keeps_a_cross_tokenizer_answer_exact_and_unmarked(loaded,
                                                                              monkeypatch):
    """`lookup = true` on a draft of another tokenizer: prompt lookup proposes where it finds
    a match (one token, COPY_SPAN 1: so it does on tiny models), the draft elsewhere; the answer is
    the target's own, and only the draft's proposals carry an alignment."""
    from specchat.chat.decoding import drafter_for
    from specchat.chat.cross.drafter import CrossTokenizerDrafter
    from specchat.engine import LookupFirstDrafter

    monkeypatch.setattr(LookupFirstDrafter, "COPY_SPAN", 1)
    proposed_by = []
    propose = LookupFirstDrafter.propose

    def spied(self, *args, **kwargs):
        proposal = propose(self, *args, **kwargs)
        if len(proposal):
            proposed_by.append("lookup" if self.by_lookup else "draft")
        return proposal

    monkeypatch.setattr(LookupFirstDrafter, "propose", spied)
    pair = loaded("lookup")
    drafter = drafter_for(pair)
    assert isinstance(drafter, LookupFirstDrafter)
    assert isinstance(drafter.drafter, CrossTokenizerDrafter)
    used = set()
    for prompt in PROMPTS:
        proposed_by.clear()
        spec, _ = answer(pair, prompt)
        plain, _ = answer(pair, prompt, speculate=False)
        assert committed_ids(spec) == committed_ids(plain), prompt
        drafts = [u.accepted + u.rejected for u in spec if u.accepted + u.rejected]
        assert len(drafts) == len(proposed_by)
        for by, spans in zip(proposed_by, drafts):
            expected = {""} if by == "lookup" else {"one", "merged", "split"}
            assert {s.alignment for s in spans} <= expected, (by, spans)
        used |= set(proposed_by)
    assert used == {"lookup", "draft"}, "one drafter never proposed: the test proves less"


def test_sampled_cross_tokenizer_answers_are_reproducible_and_accept_drafts(loaded):
    pair = loaded("bytelevel")
    params = SamplingParams(temperature=0.8)
    first = [answer(pair, p, params=params, seed=5)[1] for p in PROMPTS]
    second = [answer(pair, p, params=params, seed=5)[1] for p in PROMPTS]
    assert [d.text for d in first] == [d.text for d in second]
    assert sum(d.stats.drafted for d in first) > 0


def test_run_jsonl_gives_each_round_its_alignment(config):
    from click.testing import CliRunner

    from specchat.cli import main

    result = CliRunner().invoke(main, ["run", "--config", str(config), "--pair", "bytelevel",
                                       "--jsonl", "--max-new-tokens", "16", "hello there"])
    assert result.exit_code == 0, result.output
    rounds = [json.loads(line) for line in result.output.splitlines()
              if line.startswith("{") and '"round"' in line]
    drafted = [r for r in rounds if r["accepted"] or r["rejected"]]
    assert drafted, "no round drafted"
    for record in drafted:
        assert len(record["alignment"]) == len(record["accepted"]) + len(record["rejected"])


def test_k_auto_times_the_cross_tokenizer_draft_per_target_token_and_stays_exact(loaded):
    """k = "auto" starts from timed step costs: the draft's c is its time per proposed target
    token (its whole proposal: the draft's steps and the re-tokenizing)."""
    from specchat.chat.baseline_timing import measure_baseline_costs
    from specchat.engine.adaptive import settings_for

    pair = loaded("bytelevel")
    costs = measure_baseline_costs(pair, widths=(1, 2, 3), repeats=1)
    assert costs.c is not None and costs.c > 0
    for prompt in PROMPTS[:2]:
        session = ChatSession(pair, settings=settings_for("auto", SamplingParams(), prior=costs))
        spec = [e for e in session.answer(prompt, max_new_tokens=24) if isinstance(e, RoundUpdate)]
        plain, _ = answer(pair, prompt, speculate=False)
        assert committed_ids(spec) == committed_ids(plain)


def test_a_race_replays_the_answer_target_only_with_the_same_text(loaded):
    pair = loaded("bytelevel")
    session = ChatSession(pair, seed=2)
    done = list(session.answer("The quick brown fox", max_new_tokens=20))[-1]
    raced = list(session.replay_last(max_new_tokens=20))[-1]
    assert raced.text == done.text and raced.stats.drafted == 0


def test_bench_acceptance_reports_identity_and_acceptance_in_target_tokens(config):
    from click.testing import CliRunner

    from specchat.cli import main

    result = CliRunner().invoke(main, ["bench", "acceptance", "--config", str(config), "--pair",
                                       "metaspace", "--limit", "3", "--max-new-tokens", "12",
                                       "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    spec = report["total"]["arms"]["spec"]
    assert spec["identical"] == {"identical": 3, "answers": 3}
    assert spec["drafted"] and report["total"]["arms"]["target"]["drafted"] is None


def test_retokenizing_a_draft_of_the_targets_own_tokenizer_costs_little_acceptance(loaded):
    """`retokenize = "always"` sends the same draft through the cross-tokenizer path: the
    output is still the target's, and the acceptance is about what it is as one tokenizer
    (what the method itself costs, apart from a draft of another tokenizer being another
    model)."""
    same, forced = loaded("same"), loaded("forced")
    assert same.draft_tokenizer is None and forced.draft_tokenizer is not None
    rates = {}
    for name, pair in (("same", same), ("forced", forced)):
        accepted = drafted = 0
        for prompt in PROMPTS:
            updates, done = answer(pair, prompt)
            plain, _ = answer(pair, prompt, speculate=False)
            assert committed_ids(updates) == committed_ids(plain), f"{name}: {prompt!r}"
            accepted, drafted = accepted + done.stats.accepted, drafted + done.stats.drafted
        rates[name] = accepted / drafted
    assert abs(rates["forced"] - rates["same"]) < 0.1, rates


@pytest.mark.parametrize("name", ["bytelevel", "llama"])
def test_a_next_question_keeps_the_targets_cache_beside_a_draft_of_another_tokenizer(
        loaded, name):
    """The target keeps the first exchange; the draft reads the prompt again in its own
    tokens; the answer is the one empty caches give."""
    from test_kept_prefix import assert_reads_only_the_new_tokens, second_answer

    result = second_answer(loaded(name))
    assert result.kept == result.held
    assert_reads_only_the_new_tokens(result)


@pytest.mark.parametrize("name", ["bytelevel", "llama"])
def test_a_draft_of_another_tokenizer_keeps_its_own_cache_for_the_next_question(
        loaded, name, monkeypatch):
    """The chat makes a drafter per answer; the new one's draft context keeps what the draft
    model's cache holds of the prompt's draft tokens (its own record), so the draft's first
    step of the next question reads only the tokens after the first exchange (and the few a
    word boundary backs off to), where a context from empty caches reads them all."""
    from test_kept_prefix import committed

    from specchat.chat.decoding import decoder_for
    from specchat.engine import Settings

    pair = loaded(name)
    fed: list[int] = []
    forward = pair.draft.forward

    def counting(ids, keep=1):
        fed.append(int(ids.numel()))
        return forward(ids, keep)

    monkeypatch.setattr(pair.draft, "forward", counting)
    encode = pair.tokenizer.encode
    question = encode("The quick brown fox jumps over the lazy dog, and then")
    first, _ = committed(decoder_for(pair), question, Settings(k=3), 14)
    prompt = question + first + encode(" the cat sat on the mat")
    reads = []
    for keep in (len(prompt), 0):
        fed.clear()
        committed(decoder_for(pair), prompt, Settings(k=3), 14, keep=keep)
        reads.append(fed[0])
    kept_read, fresh_read = reads
    assert kept_read + len(question) <= fresh_read
