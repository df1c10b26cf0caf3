"""The shipped draft as a GGUF file, `builtin:smollm2-135m-draft.gguf` (slow: builds it
from SmolLM2-135M-Instruct's GGUF on first use): llama.cpp loads it with the target's
vocabulary, and on 200 positions of real text its greedy proposals are the torch
draft's, differing only where the torch draft's top two are closer than Q8_0's rounding
of llama.cpp's logits at that position could move them, and never a token outside the
reduced vocabulary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow

POSITIONS = 200
ROUNDING_BOUND = 1.5
"""The largest logit difference Q8_0 may make at a position (seen: at most 0.78 on logits
of 15-30, on a CPU with AVX-512; llama.cpp's kernels round differently per instruction set)."""


@pytest.fixture(scope="module")
def built():
    from specchat.models.gguf.drafts import gguf_file
    from specchat.models.config.refs import parse_ref

    return gguf_file(parse_ref("builtin:smollm2-135m-draft.gguf"))


def real_text_ids(tokenizer) -> list[int]:
    from specchat.distill.run import default_prompts
    from specchat.distill.teacher import read_prompts

    return tokenizer.encode("\n\n".join(read_prompts(default_prompts())))[:POSITIONS]


def test_llama_cpp_would_accept_the_builtin_gguf_draft_for_its_target(built):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from specchat.models.config.refs import builtin_gguf

    from specchat.models.llamacpp.baselines import open_llama, speculation_incompatibility

    # open_llama, not llama_cpp.Llama: it never repacks where llama.cpp's AMX kernels crash
    draft = open_llama(built, threads=2, n_ctx=64)
    target = open_llama(builtin_gguf("smollm2-135m-instruct"), threads=2, n_ctx=64)

    assert draft.n_vocab() == target.n_vocab()
    assert speculation_incompatibility(target, draft) is None


def test_builtin_gguf_draft_proposes_what_the_torch_draft_proposes(built):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specchat.models.llamacpp.baselines import open_llama
    from specchat.models.weights import assembled_draft as ensure_assembled
    from specchat.models.torch_backend.shipped_draft import DraftSpec
    from specchat.models.config.refs import builtin_draft

    folder = builtin_draft("smollm2-135m-draft")
    assembled = ensure_assembled(folder)
    ids = real_text_ids(AutoTokenizer.from_pretrained(assembled))
    assert len(ids) == POSITIONS
    model = AutoModelForCausalLM.from_pretrained(assembled, dtype=torch.float32).eval()
    vocab = torch.tensor(DraftSpec.load(folder).vocab)
    with torch.no_grad():
        reference = model(torch.tensor([ids])).logits[0][:, vocab]
    llm = open_llama(built, threads=2, n_ctx=512, logits_all=True)
    llm.eval(ids)
    scores = torch.tensor(np.array(llm.scores[:POSITIONS]))
    chosen = scores.argmax(-1)
    assert torch.isin(chosen, vocab).all()
    rounding = (scores[:, vocab] - reference).abs().max(-1).values
    assert rounding.max() < ROUNDING_BOUND  # Q8_0's rounding, not another model
    differ = (chosen != vocab[reference.argmax(-1)]).nonzero().flatten()
    top2 = reference[differ].topk(2).values
    gaps = top2[:, 0] - top2[:, 1]
    # a flip needs the two logits to move apart by the gap: at most twice the rounding there
    assert (gaps < 2 * rounding[differ]).all(), list(zip(differ.tolist(), gaps.tolist()))
    assert len(differ) <= POSITIONS // 20
