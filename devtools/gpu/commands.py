"""`python -m devtools scale | campaign | publish`: the GPU measurement's three commands (click).

`scale` measures random-weight models at real Llama scale; `campaign PHASE` runs one phase
of the whole GPU measurement as timed steps; `publish` writes a campaign's results into
docs/gpu/ and docs/benchmarks.md. The measuring is in devtools/gpu/; every command has a CPU
dry run (`--tiny` / `--dry-run`) that the test suite runs. Developer-only: not in the wheel.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from devtools.gpu.campaign import PHASE_BUDGET_S, PHASES
from specchat.commands.options import check_output_file
from specchat.engine.params import K_MAX
from specchat.errors import UsageError

CONTEXT = {"help_option_names": ["-h", "--help"]}


def split_list(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@click.command("scale", context_settings=CONTEXT)
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="JSON lines file the measurements are appended to.")
@click.option("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if present).")
@click.option("--tiny", is_flag=True, help="Tiny shapes: a dry run of the plumbing.")
@click.option("--shapes", default="1b,8b", show_default=True, callback=split_list)
@click.option("--quant", "quantizations", default="none,8bit,4bit", show_default=True,
              callback=split_list, help="none, 8bit, 4bit (bitsandbytes: CUDA only).")
@click.option("--k", type=click.IntRange(min=1, max=K_MAX), default=4, show_default=True,
              help="Draft length of the speculative runs (its verify width k + 1 is timed).")
@click.option("--tokens", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--budget-s", type=click.FloatRange(min=1), default=500.0, show_default=True)
def scale(out: Path, device: str | None, tiny: bool, shapes: tuple[str, ...],
          quantizations: tuple[str, ...], k: int, tokens: int, repeats: int,
          budget_s: float) -> None:
    """Real-scale Llama shapes on random weights: bandwidth, v(n), capture, speculation."""
    from devtools.gpu.scale import ScaleSettings, run_scale

    device = scale_device(device)
    check_scale_choices(shapes, quantizations)
    check_output_file("--out", out)
    settings = ScaleSettings(device, tiny, shapes, quantizations, k, tokens, repeats, budget_s)
    command = (f"python -m devtools scale --out {out} --device {device}{' --tiny' if tiny else ''} "
               f"--shapes {','.join(shapes)} --quant {','.join(quantizations)} --k {k} "
               f"--tokens {tokens} --repeats {repeats} --budget-s {budget_s:g}")
    with open(out, "a") as handle:
        run_scale(settings, handle, command, echo=click.echo)


def scale_device(requested: str | None) -> str:
    """The device `scale` runs on: cuda where present unless told; a CUDA device asked
    for where none is visible is a one-line error."""
    import torch

    if requested in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not re.fullmatch(r"cpu|cuda(:\d+)?", requested):
        raise UsageError(f"--device {requested!r}: choose cuda, cuda:N or cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {requested}: no CUDA GPU is visible here; "
                         "--device cpu --tiny runs every part on this CPU with tiny shapes")
    return requested


def check_scale_choices(shapes: tuple[str, ...], quantizations: tuple[str, ...]) -> None:
    from specchat.models.torch_backend.synthetic import QUANTIZATIONS, SHAPES

    for option, given, known in (("--shapes", shapes, SHAPES), ("--quant", quantizations, QUANTIZATIONS)):
        unknown = [name for name in given if name not in known]
        if unknown or not given:
            raise UsageError(f"{option} {','.join(given) or '(empty)'}: choose from {', '.join(known)}")


@click.command("campaign", context_settings=CONTEXT)
@click.argument("phase", type=click.Choice(PHASES))
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Folder for results.jsonl, scale.jsonl, device.txt and campaign.toml.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False,
                                                         exists=True), default=None)
@click.option("--prompts", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="Prompt set (default: the one shipped with specchat).")
@click.option("--pair", default="smollm2-135m-torch", show_default=True)
@click.option("--ngram-pair", default="smollm2-135m-ngram", show_default=True)
@click.option("--gguf-pair", default="smollm2-135m-plain", show_default=True)
@click.option("--budget-s", type=click.IntRange(min=30), default=None,
              help="Seconds for the phase (default: "
                   + ", ".join(f"{phase} {s}" for phase, s in PHASE_BUDGET_S.items()) + ").")
@click.option("--llama-bin", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None, help="llama.cpp's programs of the GPU build, for the llama phase.")
@click.option("--dry-run", is_flag=True, help="Tiny shapes, a few tokens, float32: the plumbing.")
@click.pass_context
def campaign(ctx: click.Context, phase: str, out: Path, config_file: Path | None,
             prompts: Path | None, pair: str, ngram_pair: str, gguf_pair: str,
             budget_s: int | None, llama_bin: Path | None, dry_run: bool) -> None:
    """One phase of the GPU measurement (scale, check, pair, llama) as timed steps within a
    budget."""
    from devtools.gpu.campaign import Plan, dry_plan, run_phase

    if not dry_run:
        require_cuda()
    plan = Plan(out, pair, ngram_pair, gguf_pair, config_file, prompts, budget_s=budget_s,
                llama_bin=llama_bin)
    run_phase(dry_plan(plan) if dry_run else plan, phase,
              note=lambda text: click.echo(text, err=True),
              run_here=lambda argv: in_process(step_roots(ctx)[argv[0]], argv))


def step_roots(ctx: click.Context) -> dict[str, click.Command]:
    """The click group that answers each in-process step's module: specchat's, and this
    command line's own (devtools'), found from the context, not imported back."""
    from specchat.cli import main as specchat_main

    return {"specchat": specchat_main, "devtools": ctx.find_root().command}


def require_cuda() -> None:
    """The campaign's steps measure a CUDA GPU (bf16 against transformers, bitsandbytes,
    llama.cpp's CUDA build): on anything else they would run for hours and mean nothing."""
    import torch

    if not torch.cuda.is_available():
        raise UsageError("campaign measures a CUDA GPU and none is visible here; "
                         "--dry-run runs every phase on this CPU with tiny models")


def in_process(root: click.Command, argv: tuple[str, ...]):
    """`python -m MODULE ARGS` (`argv`) run by MODULE's click group `root` in this process, its
    output captured as a subprocess's would be (a dry run's steps pay the imports once)."""
    import io
    import subprocess
    import traceback
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = root.main(list(argv[1:]), prog_name=argv[0], standalone_mode=False)
        except Exception:  # noqa: BLE001 - recorded like a crashed subprocess
            traceback.print_exc()
            code = 1
    status = code if isinstance(code, int) else 0
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


@click.command("publish", context_settings=CONTEXT)
@click.argument("folders", nargs=-1, required=True,
                type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--results-dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("docs/gpu"), show_default=True)
@click.option("--benchmarks", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=Path("docs/benchmarks.md"), show_default=True,
              help="the doc the tables go into (run from the repository's root)")
def publish(folders: tuple[Path, ...], results_dir: Path, benchmarks: Path) -> None:
    """A campaign's returned folders into docs/gpu/ and the tables into the benchmarks doc."""
    from devtools.gpu.publish import publish as write

    raw, doc = write(list(folders), results_dir, benchmarks)
    click.echo(f"wrote {raw} and the tables into {doc}")
