"""The llama.cpp backend on tiny random Llamas written as float32 GGUF files (tests/tiny_gguf.py):
its logits are torch's for the same weights, its cache rolls back for real, speculative
decoding on it is lossless (greedy identity and χ²), it mixes with a torch draft, and every
bad GGUF input is a one-line error. Skipped only where llama_cpp cannot be imported."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")

from specchat.chat.decoding import drafter_for  # noqa: E402
from specchat.engine import Decoder, Finished, ModelDrafter, Round, SamplingParams, Settings  # noqa: E402
from specchat.models.config.pairs import load_catalog  # noqa: E402
from specchat.models.llamacpp.model import LlamaCppModel  # noqa: E402
from specchat.models.loader import load_pair  # noqa: E402

PROMPT = [5, 17, 42, 99, 7, 250, 13, 64, 128, 31]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """target.gguf (2 layers), draft.gguf (its first layer), the same target and draft as
    transformers folders, a GGUF with another vocabulary, and files llama.cpp refuses."""
    from tiny import build_tokenizer, save_truncated
    from tiny_gguf import save_tiny_gguf, write_gguf

    root = tmp_path_factory.mktemp("gguf")
    tokenizer = build_tokenizer()
    target, model = save_tiny_gguf(root, tokenizer, name="target.gguf")
    model.save_pretrained(root / "target")
    tokenizer.save_pretrained(root / "target")
    draft_folder = save_truncated(root / "target", root / "draft", layers=1)
    draft = write_gguf(truncated(model), tokenizer, root / "draft.gguf")
    other, _ = save_tiny_gguf(root, build_tokenizer(300), name="other-vocab.gguf")
    (root / "notes.gguf").write_text("not a model, just text renamed to .gguf\n")
    (root / "cut.gguf").write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    alien = write_gguf(model, tokenizer, root / "alien.gguf", architecture="no-such-arch")
    return {"target": target, "draft": draft, "target_folder": root / "target",
            "draft_folder": draft_folder, "other": other, "text": root / "notes.gguf",
            "alien": alien, "cut": root / "cut.gguf", "root": root,
            **garbled_copies(target, root)}


GARBAGE_LENGTH = 2 ** 62


def garbled_copies(target: Path, root: Path) -> dict[str, Path]:
    """The target with a garbage length in its header: its first metadata key's (a string),
    and the token list's item count (an array)."""
    import struct

    import gguf

    tokens = gguf.GGUFReader(str(target)).fields["tokenizer.ggml.tokens"]
    key_length = len("tokenizer.ggml.tokens")
    places = {"garbled-string": 24,  # magic, version, tensor count, entry count: the first key
              "garbled-array": tokens.offset + 8 + key_length + 4 + 4}  # key, type, item type
    out = {}
    for name, at in places.items():
        data = bytearray(target.read_bytes())
        data[at:at + 8] = struct.pack("<Q", GARBAGE_LENGTH)
        (root / f"{name}.gguf").write_bytes(bytes(data))
        out[name] = root / f"{name}.gguf"
    return out


def truncated(model, layers: int = 1):
    import copy

    draft = copy.deepcopy(model)
    draft.model.layers = draft.model.layers[:layers]
    draft.config.num_hidden_layers = layers
    return draft


@pytest.fixture(scope="module")
def config(files) -> Path:
    toml = files["root"] / "models.toml"
    toml.write_text(f'''default = "gguf"

[pairs.gguf]
target = "{files['target']}"
draft = "{files['draft']}"
k = 3
backend = "llama.cpp"

[pairs.gguf-plain]
target = "{files['target']}"
k = 0

[pairs.mixed]
target = "{files['target']}"
draft = "{files['draft_folder']}"
k = 3
dtype = "float32"
backend = "llama.cpp"

[pairs.mismatch]
target = "{files['target']}"
draft = "{files['other']}"

[pairs.missing]
target = "{files['root'] / 'nowhere.gguf'}"

[pairs.text]
target = "{files['text']}"

[pairs.alien]
target = "{files['alien']}"

[pairs.cut]
target = "{files['cut']}"

[pairs.garbled-string]
target = "{files['garbled-string']}"

[pairs.garbled-array]
target = "{files['garbled-array']}"

[pairs.folder]
target = "{files['target_folder']}"
backend = "llama.cpp"
''')
    return toml


@pytest.fixture(scope="module")
def loaded(config):
    cache = {}

    def load(name: str, **changes):
        key = (name, tuple(sorted(changes.items())))
        if key not in cache:
            pair = dataclasses.replace(load_catalog(config).get(name), **changes)
            cache[key] = load_pair(pair)
        return cache[key]

    return load


@pytest.fixture(scope="module")
def reference(files):
    """The transformers model whose weights the target GGUF holds."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(files["target_folder"], dtype=torch.float32).eval()


def llama(path: Path, **options) -> LlamaCppModel:
    """One thread: on a machine whose cores are all busy, llama.cpp's threads wait on each
    other (a tiny model is 20x slower with 2 threads there); the results are the same."""
    return LlamaCppModel(path, threads=1, **options)


def torch_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].float()


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to llama.cpp's f16 KV cache: within 1% of the largest logit."""
    return bool((a - b).abs().max() <= 0.01 * b.abs().max())


def committed(decoder: Decoder, prompt, settings, n, generator=None) -> tuple[list[int], list[Round]]:
    rounds = [e for e in decoder.generate(prompt, settings, n, generator) if isinstance(e, Round)]
    return [t for r in rounds for t in r.committed], rounds


# --- the adapter ---------------------------------------------------------------------


def test_logits_equal_torchs_for_the_same_weights(files, reference):
    model = llama(files["target"])
    got = model.forward(torch.tensor(PROMPT), keep=len(PROMPT))
    want = torch_logits(reference, PROMPT)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert close(got, want)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_logits_are_returned_only_for_the_last_keep_positions_across_calls(files, reference):
    model = llama(files["target"])
    model.forward(torch.tensor(PROMPT[:6]), keep=1)
    got = model.forward(torch.tensor(PROMPT[6:]), keep=3)
    assert got.shape == (3, model.vocab_size)
    assert close(got, torch_logits(reference, PROMPT)[-3:])
    assert model.cache_length == len(PROMPT)


def test_a_prompt_longer_than_a_batch_goes_in_chunks_with_the_same_logits(files):
    whole = llama(files["target"])
    chunked = llama(files["target"], batch=4)
    ids = torch.tensor(PROMPT * 2)
    want = whole.forward(ids, keep=7)  # 7 rows span the last two chunks of 4
    got = chunked.forward(ids, keep=7)
    assert torch.allclose(got, want, atol=1e-4)
    assert chunked.cache_length == len(ids)


def test_crop_removes_cells_so_refeeding_equals_a_fresh_forward(files):
    model, fresh = llama(files["target"]), llama(files["target"])
    model.forward(torch.tensor(PROMPT), keep=1)
    model.forward(torch.tensor([1, 2, 3, 4]), keep=4)  # a rejected guess
    model.crop(len(PROMPT))
    assert model.cache_length == len(PROMPT)
    after_crop = model.forward(torch.tensor([9, 8, 7]), keep=3)
    assert torch.allclose(after_crop, fresh.forward(torch.tensor(PROMPT + [9, 8, 7]), keep=3), atol=1e-4)


def test_reset_empties_the_cache(files):
    model = llama(files["target"])
    model.forward(torch.tensor(PROMPT))
    model.reset()
    assert model.cache_length == 0


def test_llamacpp_reads_the_same_vocabulary_as_the_transformers_tokenizer(files):
    from specchat.models.gguf.cache import load_tokenizer

    model, tokenizer = llama(files["target"]), load_tokenizer(files["target"])
    assert model.n_vocab == len(tokenizer)
    for text in ["The quick brown fox", "def add(a, b):\n    return a + b", "SELECT name FROM users"]:
        assert model.tokenize(text) == tokenizer.encode(text, add_special_tokens=False)


def test_a_full_context_is_an_error_not_a_silent_overwrite(files):
    model = llama(files["target"], max_context=16)
    model.forward(torch.tensor(PROMPT))
    with pytest.raises(ValueError, match="context of 16 tokens is full"):
        model.forward(torch.tensor(PROMPT))


# --- decoding on llama.cpp -----------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_speculative_equals_target_only_on_llamacpp(loaded, k):
    pair = loaded("gguf")
    assert pair.backends["target"].startswith("llama.cpp") and pair.backends["draft"].startswith("llama.cpp")
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 40)
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT, Settings(k=k), 40)
    assert spec == plain
    assert any(r.rejected for r in rounds)  # the draft disagrees sometimes: rollback ran


def test_cache_lengths_follow_rejects_full_accepts_and_eos(loaded):
    """The decoder checks target == committed - 1 and the draft within its lag after every
    round, reading llama.cpp's own KV memory; both kinds of round must occur."""
    pair = loaded("gguf")
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT, Settings(k=2), 60)
    kinds = {r.token_kind for r in rounds}
    assert {"resampled", "bonus"} <= kinds
    assert pair.target.cache_length == len(PROMPT) + len(spec) - 1
    stop_at = spec[len(spec) // 2]
    eos_run, _ = committed(Decoder(pair.target, drafter_for(pair), {stop_at}), PROMPT, Settings(k=2), 60)
    assert eos_run[-1] == stop_at and len(eos_run) <= len(spec)
    assert pair.target.cache_length == len(PROMPT) + len(eos_run) - 1


def test_a_stop_while_drafting_leaves_no_cell_past_the_committed_tokens(loaded):
    pair = loaded("gguf")
    calls = 0

    def should_stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > 10  # from partway through a later round's drafting on

    decoder = Decoder(pair.target, drafter_for(pair), set())
    events = list(decoder.generate(PROMPT, Settings(k=4), 50, should_stop=should_stop))
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.stop_reason == "stopped"
    produced = len(PROMPT) + finished.new_tokens
    assert pair.target.cache_length <= produced - 1
    assert pair.draft.cache_length <= produced - 1


def test_a_llamacpp_target_runs_with_a_torch_draft(loaded):
    pair = loaded("mixed")
    assert pair.backends["target"].startswith("llama.cpp")
    assert pair.backends["draft"].startswith("torch")
    assert "not a GGUF file" in pair.reasons["backend"]
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 40)
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT, Settings(k=3), 40)
    assert spec == plain
    assert sum(len(r.accepted) for r in rounds) > 0


def test_the_same_gguf_on_torch_decodes_the_same_greedy_tokens(loaded):
    """In float32 (docs/design.md §3): on a CPU with AVX-512 BF16, dtype "auto" picks bfloat16 for
    torch, and a tiny random model's near-ties then part the two at the first token."""
    on_llama = loaded("gguf-plain")
    on_torch = loaded("gguf-plain", backend="torch", dtype="float32")
    assert on_torch.backends["target"].startswith("torch")
    llama, _ = committed(Decoder(on_llama.target, None, set()), PROMPT, Settings(k=0), 30)
    torch_ids, _ = committed(Decoder(on_torch.target, None, set()), PROMPT, Settings(k=0), 30)
    assert llama == torch_ids


def test_loaded_pair_reports_context_eos_and_size_from_llamacpp(loaded):
    pair = loaded("gguf")
    assert pair.context_length == 512  # the tiny model's trained context, under the cap
    eos = pair.eos_ids
    assert pair.tokenizer.convert_tokens_to_ids("<|im_end|>") in eos  # the GGUF's EOS
    assert all(pair.tokenizer.convert_ids_to_tokens(i) in pair.tokenizer.all_special_tokens for i in eos)
    assert pair.memory_bytes > 0 and pair.device == "cpu"


def test_a_gguf_draft_is_checked_against_its_target_without_a_tokenizer_of_its_own(files, loaded):
    """The draft's vocabulary is compared by a digest of its file header's token texts
    (remembered per file): its tokenizer is never converted, loading a pair pays for one."""
    from specchat import paths
    from specchat.models.gguf.cache import cache_key
    from specchat.models.vocabulary import gguf_digest

    pair = loaded("gguf")
    assert pair.draft_tokenizer is None
    tokenizers = paths.cache_dir() / "tokenizers"
    assert (tokenizers / cache_key(files["target"])).is_dir()
    assert not (tokenizers / cache_key(files["draft"])).exists()
    same = [gguf_digest(files[name]) for name in ("target", "draft")]
    assert same[0] == same[1] != gguf_digest(files["other"])


def test_this_cpu_only_build_keeps_every_layer_on_the_cpu_and_says_why(loaded):
    """The real bindings of this machine's build (no GPU offload): gpu_layers = "all" falls
    back to the CPU, and the reason says so."""
    pair = loaded("gguf")
    assert pair.target.gpu_layers == 0 and pair.draft.gpu_layers == 0
    assert "no GPU offload" in pair.reasons["backend"] and pair.device_label == "cpu"


def test_the_threads_of_a_llamacpp_target_come_from_the_caller_then_the_pair(config, loaded,
                                                                            monkeypatch):
    from specchat.models.device import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: 16)  # 3 threads are no cap here
    pair = dataclasses.replace(load_catalog(config).get("gguf-plain"), threads=3)
    assert load_pair(pair).target.threads == 3
    assert load_pair(pair, threads=2).target.threads == 2  # the caller's choice wins
    assert load_pair(pair, beside_screen=True).target.threads == 3  # the pair's, screen or not
    label = loaded("gguf-plain", threads=1).backends["target"]
    assert ", 1 thread)" in label or ", 1 thread;" in label  # notes may follow (AMX: repack.py)


def test_a_llamacpp_target_beside_the_screen_leaves_it_a_core(config, monkeypatch):
    from specchat.models.device import cores

    plain = load_catalog(config).get("gguf-plain")
    for physical, threads in [(2, 1), (1, 1), (16, 15)]:
        monkeypatch.setattr(cores, "usable_cores", lambda: physical)
        monkeypatch.setattr(cores, "physical_cores", lambda: physical)
        assert load_pair(plain, beside_screen=True).target.threads == threads
        assert load_pair(plain).target.threads == physical  # `run` and `bench`: every core


def test_the_chat_reads_a_prompt_on_every_core_and_decodes_on_one_fewer_draft_included(
        config, monkeypatch):
    """The chat leaves the screen a core while tokens stream, but nothing streams while a
    prompt is read: a forward of more than PREFILL_TOKENS keeping one row of logits (the
    engine's catch-up chunk) runs on `prefill_threads`, a verify or a step on `threads`.
    The GGUF draft takes the target's threads (it used to take every core in the chat)."""
    from specchat.commands.chat import pair_service
    from specchat.models.device import cores
    from specchat.models.llamacpp.model import PREFILL_TOKENS

    monkeypatch.setattr(cores, "usable_cores", lambda: 4)
    monkeypatch.setattr(cores, "physical_cores", lambda: 4)
    service = pair_service(load_catalog(config).get("gguf"), None, 16, None)
    pair = service.loader(None, lambda _: None)
    assert (pair.target.threads, pair.target.prefill_threads) == (3, 4)
    assert (pair.draft.threads, pair.draft.prefill_threads) == (3, 4)
    assert "3 threads, prompts on 4" in pair.backends["target"]
    calls = []
    real = pair.target._lib

    class Spy:
        def __getattr__(self, name):
            if name == "llama_set_n_threads":
                return lambda ctx, steps, batch: calls.append((steps, batch)) or getattr(real, name)(ctx, steps, batch)
            return getattr(real, name)

    pair.target._lib = Spy()
    target = pair.target
    target.reset()
    target.forward(torch.arange(3, 3 + PREFILL_TOKENS + 8), keep=1)  # a prompt's chunk
    target.forward(torch.tensor([5, 6, 7, 8]), keep=4)  # a verify of three drafts
    target.forward(torch.tensor([9]), keep=1)  # a step: llama.cpp's n_threads, no change
    target.forward(torch.arange(3, 3 + PREFILL_TOKENS), keep=1)  # too short to be a prompt
    assert calls == [(3, 4), (3, 3)]


def test_the_chat_decodes_an_int8_pair_on_every_core(config, monkeypatch):
    """torch's threads do not stall beside the screen (backend_int8.Int8Backend): the chat's
    int8 pair decodes on every core, where a llama.cpp one decodes on one fewer."""
    from specchat.commands.chat import pair_service
    from specchat.models.device import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: 4)
    monkeypatch.setattr(cores, "physical_cores", lambda: 4)
    int8 = dataclasses.replace(load_catalog(config).get("gguf"), backend="int8")
    pair = pair_service(int8, None, 16, None).loader(None, lambda _: None)
    assert "int8" in pair.backends["target"] and "4 threads)" in pair.backends["target"]
    assert "4 threads)" in pair.backends["draft"]


def test_more_threads_than_usable_cores_are_capped_with_a_note(config, monkeypatch):
    """`threads = 10000` once ran thousands of threads on 2 cores (2 tokens in 3 minutes)."""
    from specchat.models.device import cores

    monkeypatch.setattr(cores, "usable_cores", lambda: 2)
    pair = dataclasses.replace(load_catalog(config).get("gguf-plain"), threads=10000)
    loaded = load_pair(pair)
    assert loaded.target.threads == 2
    assert "2 threads; threads = 10000 capped to the 2 usable cores" in loaded.backends["target"]


# --- χ²: sampled speculative decoding on llama.cpp follows the target ------------------


def first_tokens(decoder: Decoder, k: int, params: SamplingParams, runs: int) -> torch.Tensor:
    """How often each token came first in `runs` sampled answers."""
    generator = torch.Generator().manual_seed(k)
    counts = torch.zeros(decoder.target.vocab_size)
    for _ in range(runs):
        tokens, _ = committed(decoder, PROMPT, Settings(k=k, sampling=params), 2, generator)
        counts[tokens[0]] += 1
    return counts


def chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """χ² goodness of fit of `counts` to `probs`, pooling the cells expected below 5."""
    from scipy.stats import chisquare

    expected = probs.double() * counts.sum()
    big = expected >= 5
    observed = torch.cat([counts[big].double(), counts[~big].sum().reshape(1)])
    expected = torch.cat([expected[big], expected[~big].sum().reshape(1)])
    return float(chisquare(observed.numpy(), expected.numpy() * observed.sum().item()
                           / expected.sum().item()).pvalue)


def test_sampling_on_llamacpp_reproduces_the_target_distribution(files):
    """The first token of a speculative answer (an accepted draft or a resampled token)
    follows the target's distribution; the draft's own samples fail the same check."""
    from specchat.engine.sampling import to_probs

    target, draft = llama(files["target"]), llama(files["draft"])
    params, runs = SamplingParams(temperature=1.0), 1500
    probs = to_probs(target.forward(torch.tensor(PROMPT))[-1], params)
    speculative = first_tokens(Decoder(target, ModelDrafter(draft), set()), 2, params, runs)
    assert chi2_pvalue(speculative, probs) > 1e-3
    draft_alone = first_tokens(Decoder(draft, None, set()), 0, params, runs // 5)
    assert chi2_pvalue(draft_alone, probs) < 1e-6


# --- bad inputs through the CLI: exit 2, one line, no traceback ----------------------


def run_cli(config: Path, pair: str, *extra: str):
    from click.testing import CliRunner

    from specchat.cli import main

    return CliRunner().invoke(main, ["run", "--config", str(config), "--pair", pair,
                                     "--max-new-tokens", "2", *extra, "hello"])


@pytest.mark.parametrize("pair, words", [
    ("missing", "does not exist"),
    ("text", "cannot load"),
    ("alien", "cannot load"),
    ("folder", "needs a GGUF target"),
])
def test_a_bad_gguf_pair_is_one_line_and_exit_2(config, pair, words):
    result = run_cli(config, pair)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0]
    assert "Traceback" not in result.output


def test_an_unreadable_gguf_on_torch_is_one_line_too(config):
    result = run_cli(config, "text", "--backend", "torch")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "not a GGUF model file" in lines[0]


@pytest.mark.parametrize("backend", ["llama.cpp", "torch"])
def test_a_truncated_gguf_is_named_as_such_with_both_sizes_on_either_backend(config, files, backend):
    result = run_cli(config, "cut", "--backend", backend)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    whole, cut = files["target"].stat().st_size, files["cut"].stat().st_size
    assert len(lines) == 1 and "truncated or corrupt" in lines[0] and str(files["cut"]) in lines[0]
    assert f"{whole:,} bytes" in lines[0] and f"has {cut:,}" in lines[0]


@pytest.mark.parametrize("backend", ["llama.cpp", "torch"])
@pytest.mark.parametrize("pair", ["garbled-string", "garbled-array"])
def test_a_garbage_length_in_a_gguf_header_is_named_never_allocated(config, files, backend, pair):
    result = run_cli(config, pair, "--backend", backend)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output and "MemoryError" not in result.output
    assert f"cannot load GGUF file {files[pair]}: truncated or corrupt" in lines[0]
    assert f"{GARBAGE_LENGTH:,}" in lines[0] and f"{files[pair].stat().st_size:,}-byte file" in lines[0]


def test_run_shows_both_backends_and_why(config):
    result = run_cli(config, "mixed")
    assert result.exit_code == 0, result.output
    assert "target backend:" in result.output and "llama.cpp (" in result.output
    assert "draft backend:" in result.output and "torch (" in result.output


def test_time_inside_llamacpp_includes_the_wait_for_offloaded_layers(config):
    """With layers on a GPU `llama_decode` returns before the device ends; the wait then lands
    in whatever reads the logits, outside the time a benchmark charges to llama.cpp's forwards
    (`decode_s`). Here a fake device takes 50 ms after each decode returns."""
    import time

    pair = load_pair(load_catalog(config).get("gguf-plain"))
    target, real = pair.target, pair.target._lib

    class GpuLike:
        def __getattr__(self, name):
            if name == "llama_synchronize":
                return lambda ctx: time.sleep(0.05) or real.llama_synchronize(ctx)
            return getattr(real, name)

    target._lib = GpuLike()
    target.reset()
    before = target.decode_s
    target.forward(torch.tensor([5, 6, 7]), keep=1)
    target.forward(torch.tensor([8]), keep=1)
    assert target.decode_s - before >= 0.1


@pytest.mark.parametrize("name", ["gguf", "gguf-plain"])
def test_a_next_question_reads_only_its_new_tokens_on_llama_cpp(loaded, name):
    """llama.cpp's KV memory keeps the first exchange; the answer is the one empty caches give."""
    from test_kept_prefix import assert_reads_only_the_new_tokens, second_answer

    result = second_answer(loaded(name))
    assert result.kept == result.held
    assert_reads_only_the_new_tokens(result)
