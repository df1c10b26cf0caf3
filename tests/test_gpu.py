"""CUDA only (marked `gpu`; skipped without a GPU): the fast path (static cache,
steps captured as CUDA graphs by torch.compile) gives the eager path's greedy
output in float32, keeps the cache invariant every round, and 4bit/8bit targets
load through bitsandbytes and answer."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from specchat.chat.decoding import drafter_for
from specchat.engine import Decoder, Finished, ModelDrafter, NgramDrafter, SamplingParams, Settings

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def cuda_pairs(tiny_config):
    """The tiny pair loaded eagerly and through the fast path, both on CUDA in float32."""
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    catalog = load_catalog(tiny_config)
    loaded = {}
    for mode, forward in (("0", "eager"), ("1", "static")):
        for name in ("tiny", "tiny-ngram"):
            pair = dataclasses.replace(catalog.get(name), device="cuda", dtype="float32",
                                       torch_forward=forward)
            loaded[(name, mode)] = load_pair(pair)
    return loaded


def greedy(pair, k, prompt, budget=40):
    decoder = Decoder(pair.target, drafter_for(pair) if k else None, pair.eos_ids, check_invariants=True)
    events = decoder.generate(prompt, Settings(k, SamplingParams()), budget)
    return [t for e in events if not isinstance(e, Finished) for t in e.committed]


def test_fast_path_is_selected_automatically_on_cuda(cuda_pairs):
    from specchat.models.torch_backend.static import StaticCausalModel

    fast = cuda_pairs[("tiny", "1")]
    assert isinstance(fast.target, StaticCausalModel) and fast.target.compiled
    assert isinstance(fast.draft_model, StaticCausalModel)
    assert not isinstance(cuda_pairs[("tiny", "0")].target, StaticCausalModel)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_fast_path_greedy_equals_eager_in_float32(cuda_pairs, k):
    prompt = list(range(4, 40))
    eager = greedy(cuda_pairs[("tiny", "0")], 0, prompt)
    assert greedy(cuda_pairs[("tiny", "1")], k, prompt) == eager


def test_fast_path_ngram_greedy_equals_eager_with_cache_invariants(cuda_pairs):
    prompt = [5, 6, 7, 8, 9] * 8
    eager = greedy(cuda_pairs[("tiny-ngram", "0")], 0, prompt)
    assert greedy(cuda_pairs[("tiny-ngram", "1")], 6, prompt) == eager  # checks invariants each round


@pytest.mark.parametrize("quantization", ["4bit", "8bit"])
def test_quantized_target_loads_and_answers(tiny_config, quantization):
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("bitsandbytes is not installed")
    from specchat.chat.session import ChatSession
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny-ngram"), device="cuda",
                                 dtype="float16", quantization=quantization)
    pair = load_pair(config)
    events = list(ChatSession(pair).answer("hello there", max_new_tokens=8))
    assert events[-1].stats.tokens >= 1
    assert pair.memory_bytes > 0


def test_own_forward_is_captured_as_cuda_graphs_and_keeps_greedy_identity(cuda_pairs):
    from specchat.models.torch_backend.static_llama import GraphSteps, StaticLlama

    eager = cuda_pairs[("tiny", "0")]
    target = StaticLlama(eager.target.model, eager.target.vocab_size, max_length=256)
    assert target.compiled and isinstance(target._step, GraphSteps)
    target.prepare(widths=9)
    assert target.capture_s > 0 and target.compile_error is None
    prompt = list(range(4, 40))
    reference = greedy(eager, 0, prompt)
    decoder = Decoder(target, None, eager.eos_ids, check_invariants=True)
    events = decoder.generate(prompt, Settings(0, SamplingParams()), 40)
    assert [t for e in events if not isinstance(e, Finished) for t in e.committed] == reference


def test_a_speculative_round_syncs_the_host_once(cuda_pairs):
    from specchat.engine.host_syncs import by_place, host_syncs

    pair = cuda_pairs[("tiny", "1")]
    for model in (pair.target, pair.draft_model):  # captures (each a sync) before the count
        model.prepare(widths=4)
    decoder = Decoder(pair.target, drafter_for(pair), set(), check_invariants=False)
    events = decoder.generate(list(range(4, 40)), Settings(3, SamplingParams()), 1000)
    next(events)
    with host_syncs() as places:
        for _ in range(5):
            next(events)
    assert len(places) <= 5, by_place(places)


def test_a_round_s_draft_time_on_cuda_is_the_draft_s_work_on_the_device(cuda_pairs):
    """A CUDA forward returns before it ran: the host's clock alone put the draft's time
    into the verify (engine/round_clock.py). A drafter that queues 20 ms of device work
    and returns at once must be charged those 20 ms."""
    pair = cuda_pairs[("tiny", "1")]
    cycles = spin_cycles_for(0.020)

    class SlowDrafter(ModelDrafter):
        def propose(self, *args, **kwargs):
            torch.cuda._sleep(cycles)
            return super().propose(*args, **kwargs)

    decoder = Decoder(pair.target, SlowDrafter(pair.draft_model), set(), check_invariants=False)
    rounds = [e for e in decoder.generate(list(range(4, 40)), Settings(3, SamplingParams()), 40)
              if not isinstance(e, Finished)]
    later = [e for e in rounds[2:] if e.drafted]
    assert later
    assert all(0.018 <= e.draft_s for e in later), [(e.draft_s, e.verify_s) for e in later]
    assert all(e.verify_s < 0.018 for e in later), [(e.draft_s, e.verify_s) for e in later]


def spin_cycles_for(seconds: float) -> int:
    """GPU clock cycles that `torch.cuda._sleep` spins for about `seconds` (timed here)."""
    cycles = 1_000_000
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return int(cycles * seconds * 1000 / start.elapsed_time(end))


@pytest.mark.parametrize("quantization", ["4bit", "8bit"])
def test_quantized_target_speculative_greedy_equals_its_own_target_only(tiny_config, quantization):
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip("bitsandbytes is not installed")
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny"), device="cuda",
                                 dtype="bfloat16", quantization=quantization)
    pair = load_pair(config)
    prompt = list(range(4, 40))
    plain = greedy(pair, 0, prompt, budget=24)
    spec = greedy(pair, 3, prompt, budget=24)
    if spec != plain:  # bf16: a batched verify may round a near-tie differently (docs/design.md §3)
        first = next(i for i, (a, b) in enumerate(zip(spec, plain)) if a != b)
        pair.target.reset()
        logits = pair.target.forward(torch.tensor(prompt + plain[:first], device="cuda"))[-1]
        top = logits.topk(2).values
        assert float(top[0] - top[1]) < 0.1, f"differs at {first} with a clear margin"
    assert pair.memory().peak is not None and pair.memory().target_weights > 0


def test_a_small_max_memory_offloads_part_of_the_target_to_cpu(tiny_config):
    from specchat.chat.session import ChatSession
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    config = dataclasses.replace(load_catalog(tiny_config).get("tiny-ngram"), device="auto",
                                 dtype="float32", max_memory={0: 250_000, "cpu": 10**9})
    pair = load_pair(config)
    assert {0, "cpu"} <= set(pair.target.model.hf_device_map.values()) or \
        {"cuda:0", "cpu"} <= {str(v) for v in pair.target.model.hf_device_map.values()}
    assert pair.device.startswith("cuda") and "cpu" in pair.placement
    done = list(ChatSession(pair).answer("hello there", max_new_tokens=8))[-1]
    assert done.stop_reason != "failed" and done.stats.tokens >= 1
