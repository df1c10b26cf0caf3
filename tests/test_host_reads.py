"""A speculative round moves data between the host and the device once (decoder.read_round's
`tolist`): on a GPU every other read of a device value, and every blocking copy of host
values to it, is a synchronisation that stalls the round. On the CPU a torch-function mode
sees each, inside inference mode too: reads (`.item()`, `int(t)`, `bool(t)`, `float(t)`,
`.tolist()`, indexing with a 0-dim tensor) and tensors made from host values straight onto
a device (`torch.tensor(..., device=)`, a blocking copy there). A round may make the one
read, greedy or sampled, with a model draft whose head covers part of the vocabulary (beyond
the tokenizer's, as real heads can) or an n-gram draft. `.numpy()` is not counted: the
engine calls it only on CPU tensors (`numpy_friendly`)."""

from __future__ import annotations

import inspect
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode

from specchat.engine import Decoder, ModelDrafter, NgramDrafter, SamplingParams, Settings
from specchat.engine.decoder import read_round
from specchat.models.torch_backend.hf import HFCausalModel
from specchat.models.torch_backend.lean import LeanLlama
from specchat.models.blocks.logits import scatter_logits
from specchat.models.torch_backend.reduced_vocab import ReducedVocabModel

VOCAB = 96
READS = {"item", "__int__", "__bool__", "__float__", "__index__", "tolist"}


class HostReads(TorchFunctionMode):
    """Where a tensor's value was read on the host, or host values copied onto a device,
    while the mode was active (file:line of the innermost specchat frame)."""

    def __init__(self):
        super().__init__()
        self.sites: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        zero_dim_index = (name == "__getitem__" and isinstance(args[1], torch.Tensor)
                          and args[1].dim() == 0)
        onto_device = name in ("tensor", "as_tensor") and (kwargs or {}).get("device") is not None
        if name in READS or zero_dim_index or onto_device:
            frames = [f for f in traceback.extract_stack() if "/specchat/" in f.filename]
            self.sites.append(f"{frames[-1].filename.rsplit('/specchat/', 1)[1]}:"
                              f"{frames[-1].lineno}" if frames else name)
        return func(*args, **(kwargs or {}))


def in_read_round(site: str) -> bool:
    """Whether a read's site is decoder.read_round, the round's one copy."""
    lines, first = inspect.getsourcelines(read_round)
    path, line = site.split(":")
    return path == "engine/decoder.py" and first <= int(line) < first + len(lines)


def tiny_llama(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        initializer_range=0.3, tie_word_embeddings=False)).eval()


def drafts():
    head = list(range(0, VOCAB, 2))  # every other token: q = 0 elsewhere
    return {"lean reduced head": lambda: ModelDrafter(LeanLlama(tiny_llama(1), head_ids=head)),
            "eager reduced head": lambda: ModelDrafter(ReducedVocabModel(tiny_llama(1), head)),
            "n-gram": lambda: NgramDrafter()}


def targets():
    """The target forwards a GPU runs for the Llama family: eager, and specchat's own static
    Llama with its attention spans in buckets (uncompiled here). Not transformers' static
    cache (other families): uncompiled, its mask check reads the cache position
    (masking_utils' `_ignore_causal_mask_sdpa`); on CUDA it runs compiled, where it does not."""
    from specchat.models.torch_backend.static_llama import StaticLlama

    return {"eager": lambda: HFCausalModel(tiny_llama(0)),
            "own static": lambda: StaticLlama(tiny_llama(0), max_length=256, compile_steps=False,
                                              buckets=True)}


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "sampled"])
@pytest.mark.parametrize("draft", list(drafts()))
@pytest.mark.parametrize("forward", list(targets()))
def test_a_speculative_round_reads_the_device_once(forward, draft, temperature):
    target = targets()[forward]()
    decoder = Decoder(target, drafts()[draft](), eos_ids=set(), check_invariants=False)
    rounds = decoder.generate([5, 6, 7, 8, 9] * 6, Settings(3, SamplingParams(temperature=temperature)), 500)
    next(rounds)  # the prompt's round
    with HostReads() as reads:
        for _ in range(6):
            next(rounds)
    assert len(reads.sites) == 6 and all(map(in_read_round, reads.sites)), reads.sites


def test_a_head_wider_than_the_tokenizer_scatters_without_reading_the_device():
    small = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with HostReads() as reads:
        logits = scatter_logits(small, torch.tensor([1, 4, 7]), vocab_size=5)
    assert reads.sites == [] and logits.shape == (2, 5)
    assert logits[0, 1] == 0 and logits[1, 4] == 4 and torch.isinf(logits[:, [0, 2, 3]]).all()
