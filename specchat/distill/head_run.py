"""One `specchat distill --head` run: collect the target's features, train a head, save it.

The output folder holds the head (`head.safetensors`, rewritten whenever the held-out τ
estimate improves), the feature shards (`features/`), `checkpoint.pt` and `run.json` (the
settings and the output vocabulary chosen at the start, reused on `--resume`). The target
runs only while features are missing: on the CPU on the int8 backend, and where the head
trains on a CUDA GPU, on that GPU in bfloat16 (transformers, `FeatureWave`), since there
the CPU's features would take most of the run. Training reads the target's embedding and
output rows from its int8 conversion (a memory-mapped file), never the target itself.
Knows nothing about click; reports progress through callbacks.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from specchat.distill import head_data, head_train
from specchat.distill.run import check_out_folder
from specchat.distill.teacher import read_prompts
from specchat.distill.train import TrainSettings
from specchat.errors import UsageError
from specchat.models.head.files import HEAD_FILE, save_head
from specchat.models.head.network import HeadNetwork, HeadShape

PROMPT_FILES = ("prompts.jsonl", "prompts-more.jsonl")
"""The packaged prompt sets a head trains on by default (specchat/distill/)."""


@dataclass
class HeadOptions:
    """The command's options for a head."""

    target: str
    out: Path
    tokens: int = 240_000
    """Answer tokens of the target's own answers to collect features for: on the packaged
    prompts, the greedy pass over all 2,118 and sampled answers after it."""
    prompts: Path | None = None
    """A prompt file; None: every packaged set (PROMPT_FILES)."""
    vocab: int | None = 16384
    """Output vocabulary: the N most frequent answer tokens; None keeps the target's."""
    width: int = 4096
    """The head's MLP width."""
    passes: int = 2
    """Draft steps unrolled in training (head_train's training-time test)."""
    streams: int | None = None
    """Answers the target generates at once; None: `STREAMS` for the device."""
    max_new_tokens: int = 128
    seed: int = 0
    resume: bool = False
    threads: int | None = None
    features_only: bool = False
    train: TrainSettings = field(default_factory=lambda: TrainSettings(
        steps=1000, batch_size=8, lr=1e-3, checkpoint_every=50, eval_every=50))
    device: str = "auto"
    """Where the head trains: auto (a CUDA GPU where there is one), cpu, cuda or cuda:N. On
    a CUDA GPU the target's features come from that GPU too; else from the int8 backend."""
    init_from: str | None = None
    """An earlier head of the same target to start from (`builtin:NAME`, its --out folder or
    its file): its shape, vocabulary and weights are the start, and it stays the run's head
    unless training beats its held-out τ. None: a fresh head."""


STREAMS = {"cpu": 16, "cuda": 64}
"""Answers the target generates at once by default: on the CPU's int8 backend, and on a GPU
(where a wider batch costs about as much a step as one answer)."""


@dataclass
class HeadCallbacks:
    message: Callable[[str], None] = lambda text: None
    generated: Callable[[int, int], None] = lambda done, total: None
    trained: Callable[[head_train.HeadProgress], None] = lambda progress: None


def packaged_prompts() -> list[str]:
    folder = Path(__file__).parent
    return [p for name in PROMPT_FILES for p in read_prompts(folder / name)]


def run_head(options: HeadOptions, callbacks: HeadCallbacks = HeadCallbacks()) -> dict:
    """Run (or resume) the training of a head; returns a summary for the report."""
    from specchat.models.config.refs import parse_ref
    from specchat.models.gguf.drafts import gguf_file
    from specchat.models.int8.convert import converted

    out = Path(options.out)
    check_out_folder(out, options.resume)
    options = replace(options, init_from=options.init_from or run_setting(out, options.resume,
                                                                          "init_from"))
    device = training_device(options.device)  # a wrong --device fails before any feature
    earlier = earlier_head(options.init_from, options.target)  # and a wrong --init-from
    path = gguf_file(parse_ref(options.target), callbacks.message)
    if path is None:
        raise UsageError(f"--head needs a GGUF target (its features come from the int8 backend), "
                         f"and {options.target} is not one")
    started = time.perf_counter()
    collect_features(options, callbacks)
    collect_s = time.perf_counter() - started
    samples = head_data.load_shards(out / "features")
    summary = {"samples": len(samples), "answer_tokens": head_data.answer_tokens(samples),
               "collect_s": collect_s}
    if options.features_only:
        return summary | {"features_only": True}
    found = converted(path, callbacks.message)
    settings = load_or_save_run(out, options, samples, found, earlier)
    vocab = settings["vocab"]
    tables = int8_tables(found.tensors, vocab, device)
    network = HeadNetwork(HeadShape(**settings["shape"]), initialise=earlier is None)
    if earlier is not None:
        network.load_state_dict(earlier.network.state_dict())
        callbacks.message(f"starting from the head {options.init_from} (held-out τ estimate "
                          f"{earlier.info.get('heldout_tau_k4', '?')} when it was trained)")
    best = train(network.to(device), tables, samples, vocab, options, callbacks)
    return summary | {"vocab": len(vocab), "parameters": network.parameter_count,
                      "train_s": time.perf_counter() - started - collect_s, "best_tau": best}


def earlier_head(reference: str | None, target: str):
    """The head `--init-from` names, read whole (a head is tens of MB), if it was trained
    for `target`; else a one-line usage error, before any feature is collected."""
    from specchat.models.config.refs import head_file, parse_ref
    from specchat.models.head.files import load_head

    if reference is None:
        return None
    path = head_file(parse_ref(reference)) or Path(reference)
    if path.is_dir() and not (path / HEAD_FILE).is_file():
        raise UsageError(f"--init-from {reference} holds no {HEAD_FILE}: with --head, point it "
                         f"at an earlier head (`builtin:NAME`, a --head --out folder or its file)")
    earlier = load_head(path)
    if earlier.target != target:
        raise UsageError(f"--init-from {reference} is a head for {earlier.target}, not {target}: "
                         "start only from a head of the same target")
    return earlier


def collect_features(options: HeadOptions, callbacks: HeadCallbacks) -> None:
    """The target's answers and features until the shards hold `tokens` answer tokens."""
    folder = Path(options.out) / "features"
    if (folder.exists()
            and head_data.answer_tokens(head_data.load_shards(folder)) >= options.tokens):
        return
    prompts = read_prompts(options.prompts) if options.prompts else packaged_prompts()
    device = training_device(options.device)
    source = torch_answers(options, device, callbacks) if device.type == "cuda" else \
        int8_answers(options, callbacks)
    callbacks.message(f"the target answers {len(prompts)} prompts, {source.streams} at a time "
                      f"{source.where}, until {options.tokens} answer tokens have their features")
    head_data.generate_shards(source.answer, source.tokenizer, prompts, folder, options.tokens,
                              options.max_new_tokens, options.seed, callbacks.generated)


@dataclass(frozen=True)
class FeatureSource:
    """Where a run's features come from: the answers, the tokenizer that renders the
    prompts, how many answers at once, and where (for the progress line)."""

    answer: head_data.AnswerSource
    tokenizer: object
    streams: int
    where: str


def int8_answers(options: HeadOptions, callbacks: HeadCallbacks) -> FeatureSource:
    """The target on the CPU's int8 backend, answers joining its batch as others end."""
    from specchat.models.backend_int8 import open_int8_target
    from specchat.models.int8.batched import Int8Batch

    streams = options.streams or STREAMS["cpu"]
    loaded = open_int8_target(options.target, options.threads, callbacks.message)
    answer = head_data.slot_answers(Int8Batch(loaded.raw, streams), set(loaded.eos),
                                    options.max_new_tokens)
    return FeatureSource(answer, loaded.tokenizer, streams, "on the int8 backend (CPU)")


def torch_answers(options: HeadOptions, device: torch.device,
                  callbacks: HeadCallbacks) -> FeatureSource:
    """The target through transformers on `device` (bfloat16 on a GPU), answering in waves:
    a GPU's feature path (on the CPU in float32 only for its tests)."""
    from specchat.models.config.refs import parse_ref
    from specchat.models.torch_backend.feature_wave import FeatureWave
    from specchat.models.weights import eos_token_ids, load_model

    streams = options.streams or STREAMS["cuda" if device.type == "cuda" else "cpu"]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model, tokenizer = load_model(parse_ref(options.target), dtype, str(device), "none",
                                  callbacks.message)
    answer = head_data.wave_answers(FeatureWave(model), eos_token_ids(model, tokenizer),
                                    options.max_new_tokens, streams)
    return FeatureSource(answer, tokenizer, streams, f"on {device} ({str(dtype)[6:]})")


def load_or_save_run(out: Path, options: HeadOptions, samples, found, earlier=None) -> dict:
    """The run's settings; the vocabulary and the head's shape are chosen once and kept
    (from the earlier head where the run starts from one)."""
    path = out / "run.json"
    if options.resume and path.exists():
        return json.loads(path.read_text())
    arch = found.arch
    shape = HeadShape(arch.hidden, arch.heads, arch.kv_heads, arch.head_dim, options.width,
                      arch.eps, arch.rope_base, arch.qkv_bias)
    if earlier is not None:
        shape = grown_shape(earlier.network.shape, shape, options.init_from)
    eos = set(found.facts.eos)
    vocab = earlier.vocab if earlier is not None else \
        choose_vocab(samples, options.vocab, eos, arch.vocab)
    settings = {"target": options.target, "seed": options.seed, "passes": options.passes,
                "shape": shape.as_dict(), "train": asdict(options.train), "vocab": vocab,
                "init_from": options.init_from}
    path.write_text(json.dumps(settings) + "\n")
    return settings


def run_setting(out: Path, resume: bool, key: str):
    """A setting of the run that `--resume` continues (its run.json), else None."""
    path = out / "run.json"
    return json.loads(path.read_text()).get(key) if resume and path.exists() else None


def grown_shape(earlier: HeadShape, target: HeadShape, reference: str | None) -> HeadShape:
    """The earlier head's shape (its MLP width too), if it fits the target's layer shape."""
    fits = replace(earlier, intermediate=target.intermediate) == target
    if not fits:
        raise UsageError(f"--init-from {reference} has the shape {earlier.as_dict()}, and the "
                         f"target's layers need {target.as_dict()}: train a fresh head")
    return earlier


def choose_vocab(samples, size: int | None, eos: set[int], full: int) -> list[int]:
    """The `size` most frequent answer tokens, then prompt tokens, then the lowest ids; the
    end-of-sequence ids always in. None or a size past the vocabulary: every token."""
    if not size or size >= full:
        return list(range(full))
    answers, prompts = Counter[int](), Counter[int]()
    for sample in samples:
        answers.update(sample.ids[sample.prompt_len:].tolist())
        prompts.update(sample.ids[:sample.prompt_len].tolist())
    order = sorted(set(answers) | set(prompts), key=lambda t: (-answers[t], -prompts[t], t))
    chosen = set(sorted(eos & set(range(full)))[:size])
    for token in [*order, *range(full)]:
        if len(chosen) >= size:
            break
        chosen.add(token)
    return sorted(chosen)


def training_device(requested: str) -> torch.device:
    """The device the head trains on (`HeadOptions.device`; the models layer's rule)."""
    from specchat.models.device.hardware import resolve_device

    return torch.device(resolve_device(requested)[0])


def int8_tables(tensors: dict[str, torch.Tensor], vocab: list[int],
                device: torch.device = torch.device("cpu")) -> head_train.Tables:
    """The target's embedding (its int8 rows, looked up and scaled per batch) and its output
    rows of `vocab` (float32), from the int8 conversion, on `device`."""
    rows, scale = tensors["embed.rows"].to(device), tensors["embed.scale"].to(device)
    ids = torch.tensor(vocab, dtype=torch.long)
    output = (tensors["head.rows"][ids].float() * tensors["head.scale"][ids].float()[:, None]
              ).to(device)

    def embed(tokens: torch.Tensor) -> torch.Tensor:
        return rows[tokens].float() * scale[tokens].float().unsqueeze(-1)

    return head_train.Tables(embed, output)


def train(network: HeadNetwork, tables, samples, vocab: list[int], options: HeadOptions,
          callbacks: HeadCallbacks) -> float:
    out = Path(options.out)
    options.train.seed = options.seed

    def on_best(acceptance: list[float]) -> None:
        info = {"heldout_acceptance": [round(a, 4) for a in acceptance],
                "heldout_tau_k4": round(head_train.estimated_tau(acceptance), 3),
                "answer_tokens": head_data.answer_tokens(samples), "samples": len(samples),
                "seed": options.seed, "passes": options.passes}
        if options.init_from:
            info["init_from"] = options.init_from
        save_head(network, vocab, options.target, info, out / HEAD_FILE)

    callbacks.message(f"training a head ({network.parameter_count / 1e6:.1f} M parameters, "
                      f"output vocabulary {len(vocab)}) on {len(samples)} answers, "
                      f"on {network.device}")
    run = head_train.HeadTraining(options.train, options.passes, out / "checkpoint.pt", on_best,
                                  callbacks.trained, options.resume,
                                  grown=options.init_from is not None)
    return head_train.train_head(network, tables, samples, run)
