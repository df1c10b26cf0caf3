"""`specchat distill`: train a small draft for a target on the target's own answers; with
`--head`, a draft head that reads the target's hidden states (EAGLE).

Builds the options, shows progress on stderr (a bar with rate and ETA on a terminal,
plain lines with the ETA otherwise: tokens/s, loss, held-out acceptance) and prints where
the draft went and how to use it. The work itself is in `specchat.distill`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from specchat.commands.export_gguf import report, type_option



@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--target", required=True, metavar="REF",
              help="Target model: builtin:NAME, a local folder, a .gguf file or a cached hub id.")
@click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder for the draft, teacher data and checkpoints.")
@click.option("--layers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Draft layers (copies of the target's first N-1 layers and its last).")
@click.option("--vocab", type=click.IntRange(min=0), default=None,
              help="Output vocabulary: the N most frequent answer tokens (0 = all) "
                   "[default: 8192; 16384 with --head].")
@click.option("--tokens", type=click.IntRange(min=1), default=None,
              help="Answer tokens of teacher data the target generates "
                   "[default: 40000; 240000 with --head].")
@click.option("--prompts", type=click.Path(path_type=Path, dir_okay=False),
              help="Prompt set (.jsonl with a \"prompt\" field, or one per line); "
                   "default: the built-in set.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Training steps [default: 1000, with --head too].")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True,
              help="Answers per training step.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Peak learning rate [default: 0.001, with --head too].")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="Longest teacher answer.")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for torch (default: torch's choice).")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its checkpoint.")
@click.option("--init-from", type=click.Path(path_type=Path), metavar="DIR",
              help="Grow from an earlier draft of the same target (a --out folder): layers copied "
                   "from the same target layer keep its weights, new ones start as the identity. "
                   "With --head: start from an earlier head of the same target (builtin:NAME, "
                   "its --out folder or its file), keeping its shape and vocabulary.")
@click.option("--int8", is_flag=True,
              help="Ship the weights as int8 with per-row scales (about half of bfloat16).")
@click.option("--teacher-batch", type=click.IntRange(min=1), default=64, show_default=True,
              help="Answers the target generates at once for the teacher data.")
@click.option("--teacher-only", is_flag=True,
              help="Only generate the teacher data (DIR/teacher/shard-*.pt; with --head the "
                   "features, DIR/features/), no training: shards of several runs side by side "
                   "in one folder are trained on together.")
@click.option("--head", is_flag=True,
              help="Train a draft head that reads the target's hidden states (EAGLE) instead of "
                   "a small draft model; the target is a GGUF file, run on the int8 backend "
                   "(on the GPU where the head trains on one).")
@click.option("--width", type=click.IntRange(min=16), default=4096, show_default=True,
              help="With --head: the head's MLP width.")
@click.option("--passes", type=click.IntRange(min=1), default=2, show_default=True,
              help="With --head: draft steps unrolled in training (each reads the last's guess).")
@click.option("--streams", type=click.IntRange(min=1), default=None,
              help="With --head: answers the target generates at once [default: 16 on the "
                   "CPU's int8 backend, 64 on a GPU].")
@click.option("--gguf", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE.gguf",
              help="Also write the trained draft as a GGUF file for llama.cpp (needs a GGUF target).")
@type_option
def distill(target: str, out: Path, layers: int, vocab: int | None, tokens: int | None,
            prompts: Path | None, steps: int | None, batch_size: int, lr: float | None,
            max_new_tokens: int, checkpoint_every: int, device: str, seed: int,
            threads: int | None, resume: bool, init_from: Path | None, int8: bool,
            teacher_batch: int, teacher_only: bool, head: bool, width: int, passes: int,
            streams: int | None, gguf: Path | None, gguf_type: str):
    """Train a small draft for a target by self-distillation on the target's own answers."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    from specchat.distill.train import TrainSettings

    if head:
        settings = TrainSettings(steps=steps or 1000, batch_size=batch_size, lr=lr or 1e-3,
                                 checkpoint_every=checkpoint_every, eval_every=checkpoint_every)
        from specchat.distill.head_run import HeadOptions

        return distill_head(HeadOptions(
            target, out, tokens or HeadOptions.tokens, prompts,
            16384 if vocab is None else vocab or None,
            width, passes, streams, max_new_tokens, seed, resume, threads, teacher_only, settings,
            device, str(init_from) if init_from else None))
    if gguf:
        check_gguf_export(target, gguf)
    from specchat.distill.run import Callbacks, DistillOptions, run_distill

    vocab, tokens = 8192 if vocab is None else vocab, tokens or 40_000
    settings = TrainSettings(steps=steps or 1000, batch_size=batch_size, lr=lr or 1e-3,
                             checkpoint_every=checkpoint_every, eval_every=checkpoint_every)
    options = DistillOptions(target, out, layers, vocab or None, tokens, prompts, device, seed,
                             resume, max_new_tokens, teacher_batch, teacher_only, init_from=init_from,
                             int8=int8, train=settings)
    shown = DistillProgress()
    try:
        summary = run_distill(options, Callbacks(shown.message, shown.generated, shown.trained))
    finally:
        shown.done()
    if teacher_only:
        click.echo(f"teacher data: {summary['answer_tokens']} answer tokens in {summary['samples']} "
                   f"answers under {out / 'teacher'}")
        return
    click.echo(f"draft: {out} ({len(summary['layers'])} layers from target layers "
               f"{summary['layers']}, output vocabulary {summary['vocab'] or 'full'}); "
               f"best held-out acceptance {summary['best_acceptance']:.3f}")
    click.echo(f"use it as `draft = \"{out}\"` in a pair of models.toml")
    if gguf:
        from specchat.models.gguf.drafts import export_draft

        report(export_draft(out, gguf, None, gguf_type))


def distill_head(options) -> None:
    """`distill --head`: collect the target's features, train the head, say how to use it."""
    from specchat.distill.head_run import HeadCallbacks, run_head

    shown = DistillProgress()
    try:
        summary = run_head(options, HeadCallbacks(shown.message, shown.generated,
                                                  shown.head_trained))
    finally:
        shown.done()
    out = options.out
    if options.features_only:
        click.echo(f"features: {summary['answer_tokens']} answer tokens in {summary['samples']} "
                   f"answers under {out / 'features'}")
        return
    click.echo(f"head: {out / 'head.safetensors'} ({summary['parameters'] / 1e6:.1f} M "
               f"parameters, output vocabulary {summary['vocab']}); best held-out τ estimate "
               f"at k = 4 {summary['best_tau']:.2f}; features {clock(summary['collect_s'])}, "
               f"training {clock(summary['train_s'])}")
    click.echo(f"use it as `draft = \"{out}\"` in a pair of models.toml whose target is "
               f"{options.target}")


def clock(seconds: float) -> str:
    """h:mm:ss."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def check_gguf_export(target: str, gguf: Path) -> None:
    """Before training: `--gguf` needs a GGUF target and a .gguf file name."""
    from specchat.models.gguf.drafts import check_out, gguf_target

    check_out(gguf)
    gguf_target(target, "--gguf")


class DistillProgress:
    """Two bars in turn on stderr (specchat.commands.progress): teacher tokens generated,
    then training steps with tokens/s, loss and held-out acceptance."""

    def __init__(self):
        from specchat.commands.progress import stderr_console

        self.console = stderr_console()
        self.acceptance = None
        self.generation_start: tuple[int, float] | None = None
        self.training_start: tuple[int, float] | None = None
        self.phase: str | None = None
        self.bar = None

    def message(self, text: str) -> None:
        self.done()
        self.console.print(text, soft_wrap=True, markup=False)

    def generated(self, done: int, total: int) -> None:
        """The first call gives the tokens already there; the rate counts new ones only."""
        if self.generation_start is None:
            self.generation_start = (done, time.perf_counter())
        first, since = self.generation_start
        rate = (done - first) / max(time.perf_counter() - since, 1e-9)
        bar = self.enter("teacher tokens", total, None, done)
        left = ("" if bar.progress is not None or rate <= 0
                else f"  ETA {clock(max(0, total - done) / rate)}")
        bar.update(done, f"{rate:.1f} tok/s{left}")

    def trained(self, progress: Any) -> None:
        if progress.heldout_acceptance is not None:
            self.acceptance = progress.heldout_acceptance
        held = "-" if self.acceptance is None else f"{self.acceptance:.3f}"
        bar = self.enter("training step", progress.steps, "step", progress.step)
        bar.update(progress.step, f"{progress.tokens_per_s:.0f} tok/s  loss {progress.loss:.3f}  "
                                  f"held-out acceptance {held}")

    def head_trained(self, progress: Any) -> None:
        if progress.acceptance is not None:
            rates = "/".join(f"{a:.2f}" for a in progress.acceptance)
            self.acceptance = f"{rates} (τ at k = 4 ≈ {progress.tau:.2f})"
        held = self.acceptance or "-"
        bar = self.enter("training step", progress.steps, "step", progress.step)
        bar.update(progress.step, f"{progress.tokens_per_s:.0f} tok/s  loss {progress.loss:.3f}  "
                                  f"held-out acceptance per draft {held}{self.eta(bar, progress)}")

    def eta(self, bar, progress: Any) -> str:
        """A plain line's ETA, from the steps of this run so far (a bar shows its own)."""
        if bar.progress is not None:
            return ""
        first, since = self.training_start or (progress.step, time.perf_counter())
        self.training_start = (first, since)
        done = progress.step - first
        if done <= 0:
            return ""
        left = (time.perf_counter() - since) / done * (progress.steps - progress.step)
        return f"  ETA {clock(left)}"

    def enter(self, phase: str, total: int, unit: str | None, start: int):
        if self.phase != phase:
            from specchat.commands.progress import StepBar

            self.done()
            self.phase, self.bar = phase, StepBar(self.console, phase, total, unit, start)
        return self.bar

    def done(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.phase, self.bar = None, None
