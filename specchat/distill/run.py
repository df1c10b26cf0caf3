"""One `specchat distill` run: check inputs, generate teacher data, train, save.

The output folder holds the shippable draft (`draft.safetensors` +
`specchat-draft.json`, rewritten whenever held-out acceptance improves), the
teacher shards (`teacher/`), `checkpoint.pt` and `run.json` (the settings and
the output vocabulary chosen at the start, reused on `--resume`). Knows
nothing about click; reports progress through callbacks.
"""

from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from specchat.distill import draft as drafts
from specchat.distill import teacher, train
from specchat.errors import UsageError
from specchat.models.torch_backend.shipped_draft import DraftSpec, build_draft


@dataclass
class DistillOptions:
    """The command's options."""

    target: str
    out: Path
    layers: int = 2
    vocab: int | None = 8192
    """Output vocabulary size; None or 0 keeps the full vocabulary."""
    tokens: int = 40_000
    """Answer tokens of teacher data to generate."""
    prompts: Path | None = None
    device: str = "auto"
    seed: int = 0
    resume: bool = False
    max_new_tokens: int = 128
    gen_batch: int = 64
    """Answers the target generates at once (teacher data)."""
    teacher_only: bool = False
    """Stop after generating the teacher data (to combine shards of several runs)."""
    init_from: Path | None = None
    """An earlier draft of the same target to grow from (see `draft.grow_from`)."""
    int8: bool = False
    """Ship the draft's weights as int8 with per-row scales instead of bfloat16."""
    train: train.TrainSettings = field(default_factory=train.TrainSettings)


@dataclass
class Callbacks:
    message: Callable[[str], None] = lambda text: None
    generated: Callable[[int, int], None] = lambda done, total: None
    trained: Callable[[train.Progress], None] = lambda progress: None


def check_out_folder(out: Path, resume: bool) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"output folder {out} is not writable ({error.strerror}): "
                         "pick another --out") from None
    if not resume and (out / "checkpoint.pt").exists():
        raise UsageError(f"{out} already holds a training run: pass --resume to continue it, "
                         "or pick another --out")


def run_distill(options: DistillOptions, callbacks: Callbacks = Callbacks()) -> dict:
    """Run (or resume) a distillation; returns a summary for the report."""
    from specchat.models.device.hardware import resolve_device
    from specchat.models.weights import eos_token_ids, load_model
    from specchat.models.config.refs import parse_ref

    out = Path(options.out)
    check_out_folder(out, options.resume)
    if options.init_from:
        drafts.check_growable(Path(options.init_from), options.target)
    device, _ = resolve_device(options.device)
    prompts = teacher.read_prompts(options.prompts or default_prompts())
    torch.manual_seed(options.seed)
    target, tokenizer = load_model(parse_ref(options.target), torch.float32, device, "none")
    layers = drafts.pick_layers(target.config.num_hidden_layers, options.layers)
    eos = eos_token_ids(target, tokenizer)
    started = time.perf_counter()
    generate(target, tokenizer, eos, prompts, options, callbacks)
    generated_s = time.perf_counter() - started
    samples = teacher.load_shards(out / "teacher", teacher.Sample)
    if options.teacher_only:
        return {"teacher_only": True, "samples": len(samples), "generate_s": generated_s,
                "answer_tokens": teacher.answer_tokens(samples)}
    settings = load_or_save_run(out, options, layers, samples, eos, target)
    draft = build_draft(target, layers).float()
    del target
    if options.init_from and not (options.resume and (out / "checkpoint.pt").exists()):
        fresh = drafts.grow_from(draft, layers, Path(options.init_from), options.target)
        callbacks.message(f"starting from the draft in {options.init_from}; new identity "
                          f"layers: {fresh or 'none'}")
    spec = DraftSpec(options.target, layers, settings["vocab"], {})
    best = run_training(draft, samples, spec, options, eos, callbacks)
    return {"layers": layers, "vocab": len(settings["vocab"] or []) or None, "samples": len(samples),
            "answer_tokens": teacher.answer_tokens(samples), "generate_s": generated_s,
            "train_s": time.perf_counter() - started - generated_s, "best_acceptance": best}


def generate(target, tokenizer, eos, prompts, options: DistillOptions, callbacks: Callbacks) -> None:
    folder = Path(options.out) / "teacher"
    if (folder.exists() and teacher.answer_tokens(teacher.load_shards(folder, teacher.Sample))
            >= options.tokens):
        return
    callbacks.message(f"generating {options.tokens} answer tokens with the target")
    from specchat.models.device.hardware import resolve_dtype

    dtype, _ = resolve_dtype("auto", str(next(target.parameters()).device))
    fast = copy.deepcopy(target).to(dtype)
    teacher.generate_shards(fast, tokenizer, eos, prompts, folder, options.tokens,
                            options.gen_batch, options.max_new_tokens, options.seed,
                            callbacks.generated)


def load_or_save_run(out: Path, options: DistillOptions, layers, samples, eos, target) -> dict:
    """The run's settings; the vocabulary is chosen once and kept across resumes."""
    path = out / "run.json"
    if options.resume and path.exists():
        saved = json.loads(path.read_text())
        if saved["layers"] != layers:
            raise UsageError(f"{out} was trained with layers {saved['layers']}, not {layers}: "
                             "resume with the same --layers")
        return saved
    full = target.get_output_embeddings().weight.shape[0]
    settings = {"target": options.target, "layers": layers, "seed": options.seed,
                "tokens": options.tokens, "vocab": train.choose_vocab(samples, options.vocab, eos, full),
                "train": asdict(options.train)}
    path.write_text(json.dumps(settings) + "\n")
    return settings


def run_training(draft, samples, spec: DraftSpec, options: DistillOptions, eos,
                 callbacks: Callbacks) -> float:
    out = Path(options.out)
    settings = options.train
    settings.seed = options.seed

    def on_best(acceptance: float) -> None:
        spec.info = {"heldout_acceptance": round(acceptance, 4), "seed": options.seed,
                     "answer_tokens": teacher.answer_tokens(samples), "layers": spec.layers,
                     "weights": "int8" if options.int8 else "bfloat16"}
        drafts.save_shipped(draft, spec, out, int8=options.int8)

    callbacks.message(f"training a {len(spec.layers)}-layer draft (from target layers "
                      f"{spec.layers}) on {len(samples)} answers")
    return train.train(draft, samples, spec.vocab, settings, min(eos), out / "checkpoint.pt",
                       on_best, report=callbacks.trained, resume=options.resume)


def default_prompts() -> Path:
    return Path(__file__).with_name("prompts.jsonl")
