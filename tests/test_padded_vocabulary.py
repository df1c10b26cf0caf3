"""Near-compatible vocabularies speculate as one tokenizer, on every backend: a target whose
head is padded beyond its tokenizer (Qwen2.5-7B's 152,064 logit columns beside the 0.5B's
151,936) and which added a special token of its own, drafted by a model of the plain
tokenizer. The target keeps all of its columns (so it can still say what only it has), the
draft proposes among its own, and greedy speculative output equals target-only output;
sampled output follows the target's distribution with the draft's q padded by zeros."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specchat.chat.events import RoundUpdate
from specchat.chat.session import ChatSession
from specchat.engine import Decoder, ModelDrafter, SamplingParams, Settings
from lossless import VOCAB, Harness, exact_table, verdict
from test_engine_lossless import make_target, near_draft
from toy import TableModel

PADDING = 16
ADDED = "<|tool|>"
PROMPTS = ["hello there", "The quick brown fox", "def add(a, b):"]


class PaddedVocabulary:
    """A tokenizer as the GGUF writer sees it, with llama.cpp's `[PAD<id>]` rows after its
    own tokens up to `rows` (what convert_hf_to_gguf writes for a padded head)."""

    def __init__(self, tokenizer, rows: int):
        self.tokenizer, self.rows = tokenizer, rows

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(self.tokenizer.get_vocab())
        vocab.update({f"[PAD{i}]": i for i in range(len(self.tokenizer), self.rows)})
        return vocab

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def tokenizers():
    """(the target's tokenizer: the plain one plus an added special token, the draft's: plain)."""
    from tiny import build_tokenizer

    plain, extended = build_tokenizer(), build_tokenizer()
    extended.add_special_tokens({"additional_special_tokens": [ADDED]})
    return extended, plain


def models(target_tokenizer, draft_tokenizer):
    """A 2-layer target with a padded head, and its first layer as a draft whose head has the
    plain tokenizer's rows only."""
    from test_llamacpp import truncated
    from tiny import build_model

    eos = draft_tokenizer.convert_tokens_to_ids("<|im_end|>")
    target = build_model(len(target_tokenizer) + PADDING, layers=2, seed=1, eos_token_id=eos)
    draft = truncated(target)
    draft.resize_token_embeddings(len(draft_tokenizer))
    return target, draft


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    """models.toml with the pair on torch (folders) and on llama.cpp and int8 (GGUF files)."""
    from tiny_gguf import write_gguf

    root = tmp_path_factory.mktemp("padded")
    target_tokenizer, draft_tokenizer = tokenizers()
    target, draft = models(target_tokenizer, draft_tokenizer)
    for name, model, tokenizer in (("target", target, target_tokenizer),
                                   ("draft", draft, draft_tokenizer)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    write_gguf(target, PaddedVocabulary(target_tokenizer, len(target_tokenizer) + PADDING),
               root / "target.gguf")
    write_gguf(draft, draft_tokenizer, root / "draft.gguf")
    pairs = {"torch": ("target", "draft", "torch"),
             "llama": ("target.gguf", "draft.gguf", "llama.cpp"),
             "int8": ("target.gguf", "draft.gguf", "int8")}
    text = "".join(f'[pairs.{name}]\ntarget = "{root / t}"\ndraft = "{root / d}"\n'
                   f'backend = "{backend}"\nk = 3\ndtype = "float32"\n\n'
                   for name, (t, d, backend) in pairs.items())
    (root / "models.toml").write_text(text)
    return root / "models.toml"


def load(config: Path, name: str):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    if name == "int8":
        from specchat.models.backend_int8 import int8_support

        if not int8_support().usable:
            pytest.skip(int8_support().why)
    return load_pair(load_catalog(config).get(name))


def committed(pair, prompt: str, speculate: bool, params: SamplingParams | None = None):
    session = ChatSession(pair, seed=3)
    session.speculate = speculate
    if params is not None:
        session.settings.sampling = params
    events = list(session.answer(prompt, max_new_tokens=24))
    updates = [e for e in events if isinstance(e, RoundUpdate)]
    return [s.token_id for u in updates for s in u.spans if s.kind != "rejected"], events[-1]


@pytest.mark.parametrize("name", ["torch", "llama", "int8"])
def test_a_padded_head_and_an_added_token_speculate_as_one_tokenizer(config, name):
    pair = load(config, name)
    assert pair.draft_tokenizer is None, "the same core tokenizer must not be re-tokenized"
    target_rows = len(tokenizers()[0]) + PADDING
    assert pair.target.vocab_size == target_rows, "the target keeps every column of its own"
    assert pair.draft_model.vocab_size == len(tokenizers()[1])
    for prompt in PROMPTS:
        spec, done = committed(pair, prompt, speculate=True)
        plain, _ = committed(pair, prompt, speculate=False)
        assert spec == plain, f"{name}: {prompt!r}"
        assert done.stats.drafted > 0


@pytest.mark.parametrize("name", ["torch", "llama"])
def test_sampling_with_a_narrower_draft_head_accepts_drafts(config, name):
    pair = load(config, name)
    _, done = committed(pair, "The quick brown fox", True, SamplingParams(temperature=1.0))
    assert done.stats.accepted > 0 and done.stop_reason in ("eos", "max_tokens")


class NarrowTable(TableModel):
    """A draft whose head has one column fewer than its target's: q never proposes the last
    token, and verification pads q with a zero there."""

    def logits_after(self, history):
        return super().logits_after(history)[:-1]


def test_a_narrower_draft_head_keeps_the_target_distribution():
    target = make_target()
    draft = near_draft(target, NarrowTable(VOCAB, seed=7))
    params = SamplingParams(temperature=1.0)
    harness = Harness(Decoder(target, ModelDrafter(draft), set()), Settings(3, params), seed=2)
    sample = harness.run(800)
    result = verdict(sample, exact_table(target, params))
    assert result.pvalue > 1e-3, str(result)
    assert sum(c[VOCAB - 1] for c in sample.by_round_index.values()) > 0, \
        "the target must still produce the token only it has"


def test_an_unpadded_q_against_a_wider_p_is_an_error_without_widening(monkeypatch):
    """The mutant: verification that does not pad q fails on a narrower draft head."""
    from specchat.engine import verify as verify_module

    monkeypatch.setattr(verify_module, "widened", lambda q, width: q)
    target = make_target()
    decoder = Decoder(target, ModelDrafter(near_draft(target, NarrowTable(VOCAB, seed=7))), set())
    with pytest.raises(RuntimeError):
        list(decoder.generate([1, 2], Settings(3, SamplingParams(temperature=1.0)), 8,
                              torch.Generator().manual_seed(0)))
