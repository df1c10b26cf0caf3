"""`python -m devtools scale | campaign | publish | bench-ui | build-llama`: the developer
tools' click group, run from a clone of the repository.

Each command is a thin click wrapper; the work is in gpu/, ui_bench.py and llama_build.py.
A `SpecchatError` is one line and exit status 2, as in specchat's own command line (whose
group this reuses). Knows nothing about what the commands measure.
"""

from __future__ import annotations

from pathlib import Path

import click

from devtools.gpu.commands import campaign, publish, scale
from specchat.cli import Group

CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(cls=Group, context_settings=CONTEXT)
def main() -> None:
    """specchat's developer tools: the GPU campaign, the UI benchmark, llama.cpp's programs."""


@main.command("bench-ui", context_settings=CONTEXT)
@click.option("--tokens-per-s", "rate", type=float, default=2000.0, show_default=True,
              help="Pace of the scripted stream.")
@click.option("--tokens", type=click.IntRange(min=10), default=4000, show_default=True,
              help="Tokens per answer.")
@click.option("--answers", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--startup/--no-startup", default=True,
              help="Also time opening the real app in a pseudo-terminal until it accepts typing.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_ui(rate: float, tokens: int, answers: int, startup: bool, as_json: bool) -> None:
    """UI benchmark: the app against a scripted pair streaming at RATE tokens/s."""
    from devtools.ui_bench import main as bench_main

    bench_main(rate, tokens, answers, startup, as_json)


@main.command("build-llama", context_settings=CONTEXT)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Parallel compile jobs (default: every core).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where to put the programs (default: where `specchat bench` looks for them).")
def build_llama(jobs: int | None, out: Path | None) -> None:
    """Build llama.cpp's llama-bench and llama-speculative-simple from the llama.cpp that
    llama-cpp-python vendors (CMAKE_ARGS adds CMake flags, e.g. -DGGML_CUDA=on)."""
    from devtools.llama_build import build

    folder = build(lambda text: click.echo(text, err=True), jobs, out)
    click.echo(f"built into {folder} (specchat bench uses them for llama.cpp pairs)")


for command in (scale, campaign, publish):
    main.add_command(command)
