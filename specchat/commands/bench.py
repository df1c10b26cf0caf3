"""`specchat bench run | sweep | profile | overhead | turns | synthetic`: headless benchmarks.

`run` (also the bare `specchat bench`) compares specchat speculative, specchat
target-only, transformers `generate` and transformers' own speculation (for a llama.cpp
pair: llama.cpp's generate and speculation through the bindings, and llama.cpp's own
programs where built) on the same models and prompts, alternating their order within
one run. `sweep` compares fixed k with k = "auto" and transformers' heuristic (and
llama-speculative-simple at each k); `profile` adds the measured cost model (c, v(n), α,
ideal vs measured speedup); `overhead` times the loop outside model forwards; `turns`
times a chat's next question with the caches kept against read again; `synthetic`
profiles random models of real Llama shapes. Tables go to stdout (or one JSON object
with --json); progress goes to stderr. The measuring is in specchat.bench.modes.
(The GPU campaign, the UI benchmark and llama.cpp's programs' build are the repository's
developer tools, devtools/, which are not part of specchat.)
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

from specchat.commands.options import (apply_overrides, backend_option, check_output_file,
                                       config_from, config_option, dtype_option, k_option,
                                       load_pair_config, max_new_tokens_option, pair_option,
                                       temperature_option)
from specchat.engine.params import PRIOR_K_MAX
from specchat.errors import UsageError

if TYPE_CHECKING:
    from specchat.bench.prompts import BenchPrompt
    from specchat.models.config.pairs import PairConfig

PROFILE_KS = ",".join(str(k) for k in range(1, PRIOR_K_MAX + 1))
"""The fixed k a sweep compares by default: those whose verify the chat's baseline times (k = "auto"
may go on to K_MAX; --ks names longer ones)."""
CONTEXT = {"help_option_names": ["-h", "--help"]}
BUILD_HINT = "`make llama-tools` in a clone of specchat's repository"
"""How llama.cpp's own programs get built: by the repository's developer tools, not the wheel."""


class DefaultToRun(click.Group):
    """`specchat bench [OPTIONS]` with no subcommand runs `bench run [OPTIONS]`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToRun, context_settings=CONTEXT)
def bench():
    """Benchmark a pair (bare `bench` = `bench run`): specchat vs transformers, and more."""


def common_options(command: Callable):
    """The options every prompt-set benchmark takes."""
    for option in reversed([
        pair_option,
        click.option("--prompts", "prompts_file", type=click.Path(path_type=Path, dir_okay=False),
                     default=None, help="JSONL prompt set, or MT-bench / Spec-Bench questions (default: the 36 prompts shipped with specchat)."),
        max_new_tokens_option(96),
        temperature_option, dtype_option, backend_option, k_option,
        click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampling."),
        click.option("--category", "categories", multiple=True, metavar="NAME",
                     help="Only prompts of this category (repeatable)."),
        click.option("--limit", type=click.IntRange(min=1), default=None,
                     help="Only the first N prompts."),
        click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Answers per arm and prompt, interleaved; each arm's median-time "
                          "run counts (3 or more on a busy or shared machine)."),
        threads_option, json_option, html_option,
        click.option("--all-turns", is_flag=True,
                     help="MT-bench / Spec-Bench questions: every turn, each after the "
                          "conversation so far (default: the first turn only)."),
        click.option("--llama-bin", type=click.Path(path_type=Path, file_okay=False), default=None,
                     help="Folder of llama.cpp's own llama-bench and llama-speculative-simple, "
                          "run as arms for a llama.cpp pair (default: where the repository's "
                          "`make llama-tools` puts them; skipped with a note if they are not "
                          "there)."),
        config_option,
        click.pass_context]):
        command = option(command)
    return command


threads_option = click.option(
    "--threads", type=click.IntRange(min=1), default=None,
    help="torch CPU threads (default: torch's choice; 1 is steadier on a busy machine).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
html_option = click.option(
    "--html", "html_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="Also write the report as one self-contained HTML page with charts: tokens/s per "
         "category and arm, and (bench profile) v(n) against the break-even line.")
ks_option = click.option("--ks", default=PROFILE_KS, show_default=True, metavar="LIST",
                         help="Fixed draft lengths to compare, e.g. 2,3,4.")


def prompt_set_command(name: str, extra: tuple[Callable, ...]=()):
    """A subcommand over a loaded pair and the prompt set; the function gets them ready."""
    def decorate(measure: Callable):
        @bench.command(name, context_settings=CONTEXT, help=measure.__doc__)
        @common_options
        def command(ctx: click.Context, pair_name: str | None, prompts_file: Path | None,
                    max_new_tokens: int, temperature: float | None, dtype: str | None,
                    backend: str | None, k: int | str | None, seed: int,
                    categories: tuple[str, ...], limit: int | None, repeats: int,
                    threads: int | None, as_json: bool, html_file: Path | None, all_turns: bool,
                    llama_bin: Path | None, config_file: Path | None, **more: Any):
            set_threads(threads)
            check_writable(html_file)
            setup = prepare(ctx, pair_name, prompts_file, k, temperature, backend, categories,
                            limit, config_file, all_turns)
            setup.repeats, setup.llama_bin = repeats, llama_bin
            setup.keep_going = within_budget(more.pop("budget_s", None))
            print_report(measure(setup, max_new_tokens, dtype, seed, **more), as_json, html_file)
        for option in reversed(extra):
            command = option(command)
        return command
    return decorate


budget_option = click.option(
    "--budget-s", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
    help="Start no new prompt once this many seconds have passed since the command began "
         "(loading included): the report covers the prompts answered, every arm on each, and "
         "says how many were left (for a time-boxed machine such as a lent GPU).")


def within_budget(budget_s: float | None) -> Callable[[], bool]:
    """Whether a run may start another prompt: always, or until `budget_s` from now."""
    if budget_s is None:
        return lambda: True
    started = time.perf_counter()
    return lambda: time.perf_counter() - started < budget_s


class Setup:
    """The pair's configuration, the selected prompts and their file."""

    def __init__(self, pair_config: PairConfig, prompts: list[BenchPrompt], path: Path):
        self.pair_config, self.prompts, self.path = pair_config, prompts, path
        self.repeats = 1
        self.llama_bin: Path | None = None
        self.keep_going: Callable[[], bool] = lambda: True

    def programs(self):
        """llama.cpp's own programs for the arms, or None (with a note) where they are not
        built; a folder given with --llama-bin must hold them."""
        from specchat.bench.llama_programs import Programs, default_folder

        programs = Programs(self.llama_bin or default_folder())
        missing = programs.missing()
        if missing and self.llama_bin is not None:
            raise UsageError(f"--llama-bin {self.llama_bin} lacks {', '.join(missing)}: build "
                             f"them with {BUILD_HINT} (or point to their folder)")
        if missing:
            click.echo(f"note: llama.cpp's own programs are not built ({programs.folder}): "
                       f"{BUILD_HINT} adds them as arms", err=True)
            return None
        return programs

    def load(self, dtype: str | None, max_new_tokens: int):
        """The pair, its steps captured for the prompts' answers of up to `max_new_tokens`."""
        from specchat.bench.modes import load
        from specchat.commands.progress import loading_notes

        with loading_notes() as notes:
            return load(self.pair_config, dtype, notes, self.prompts, max_new_tokens)


def prepare(ctx: click.Context, pair_name: str | None, prompts_file: Path | None,
            k: int | str | None, temperature: float | None, backend: str | None,
            categories: tuple[str, ...], limit: int | None, config_file: Path | None,
            all_turns: bool = False) -> Setup:
    from specchat.bench.prompts import load_prompts, resolve_prompts_file

    pair_config = apply_overrides(load_pair_config(config_from(ctx, config_file), pair_name), k,
                                  temperature, backend=backend)
    path = resolve_prompts_file(prompts_file)
    return Setup(pair_config, select(load_prompts(path, all_turns), categories, limit, path), path)


@prompt_set_command("run", extra=(budget_option,))
def run_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int):
    """Speculative vs target-only vs transformers, per prompt, category and in total."""
    from specchat.bench.modes import run_comparison

    pair = setup.load(dtype, max_new_tokens)
    programs = setup.programs()
    with prompt_bar(setup) as on_prompt:
        return run_comparison(pair, setup.prompts, setup.path, max_new_tokens, seed, on_prompt,
                              setup.repeats, programs, setup.keep_going)


@prompt_set_command("acceptance", extra=(budget_option,))
def acceptance_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int):
    """Acceptance per category (in target tokens) and greedy identity: specchat's speculative
    and target-only arms only."""
    from specchat.bench.acceptance import run_acceptance

    pair = setup.load(dtype, max_new_tokens)
    with prompt_bar(setup) as on_prompt:
        return run_acceptance(pair, setup.prompts, setup.path, max_new_tokens, seed, on_prompt,
                              setup.keep_going)


@prompt_set_command("sweep", extra=(ks_option, budget_option))
def sweep_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int, ks: str):
    """Fixed k against k = auto and transformers' heuristic schedule; the best k per category."""
    return sweep(setup, max_new_tokens, dtype, seed, ks, profile=False)


@prompt_set_command("profile", extra=(ks_option, budget_option))
def profile_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int, ks: str):
    """The sweep plus the cost model: c, verify cost of 1..16 tokens, α, ideal vs measured."""
    return sweep(setup, max_new_tokens, dtype, seed, ks, profile=True)


follow_up_option = click.option(
    "--follow-up", default=None, metavar="TEXT",
    help="The question asked after each prompt's answer (default: a request to say it again "
         "shorter).")


@prompt_set_command("turns", extra=(follow_up_option, budget_option))
def turns_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int,
                  follow_up: str | None):
    """A chat's next question with the caches kept (only its new tokens read) against read
    again from empty caches: TTFT, answer time and identity, per category."""
    from specchat.bench.turns import FOLLOW_UP, run_turns

    pair = setup.load(dtype, 2 * max_new_tokens)
    with turns_bar(setup) as on_prompt:
        return run_turns(pair, setup.prompts, setup.path, max_new_tokens, seed,
                         follow_up or FOLLOW_UP, on_prompt, setup.keep_going)


@contextmanager
def turns_bar(setup: Setup):
    """A progress bar over the prompts; yields the callback for each follow-up answered."""
    from specchat.commands.progress import StepBar, stderr_console

    bar = StepBar(stderr_console(), "prompts", len(setup.prompts), "prompt")

    def prompt_done(prompt_id: str, runs: dict) -> None:
        times = "  ".join(f"{arm} {run.ttft_s:.2f}s" for arm, run in runs.items())
        bar.advance(f"[{prompt_id}] follow-up TTFT: {times}", keep=True)

    try:
        yield prompt_done
    finally:
        bar.close()


@prompt_set_command("overhead")
def overhead_command(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int):
    """Share of each round spent outside model forwards (timed forwards + torch.profiler)."""
    from specchat.bench.modes import run_overhead

    pair = setup.load(dtype, max_new_tokens)
    return run_overhead(pair, setup.prompts, setup.path, max_new_tokens)


@bench.command("synthetic", context_settings=CONTEXT)
@click.argument("sizes", default="1b,8b")
@dtype_option
@click.option("--layers", type=click.IntRange(min=1), default=None,
              help="Layers per synthetic model (default: all on CUDA, 2 on CPU).")
@threads_option
@json_option
def synthetic_command(sizes: str, dtype: str | None, layers: int | None, threads: int | None,
                      as_json: bool):
    """Verify cost vs tokens on random models of real Llama shapes (SIZES like 1b,8b)."""
    from specchat.bench.modes import run_synthetic

    set_threads(threads)
    print_report(run_synthetic(sizes, dtype, layers), as_json)


def sweep(setup: Setup, max_new_tokens: int, dtype: str | None, seed: int, ks: str, profile: bool):
    from specchat.bench.modes import run_sweep

    draft_lengths = parse_ks(ks)
    pair = setup.load(dtype, max_new_tokens)
    programs = setup.programs()
    with prompt_bar(setup) as on_prompt:
        return run_sweep(pair, setup.prompts, setup.path, max_new_tokens, seed, draft_lengths,
                         on_prompt, profile, note=lambda text: click.echo(text, err=True),
                         repeats=setup.repeats, programs=programs, keep_going=setup.keep_going)


def set_threads(threads: int | None) -> None:
    """torch's CPU threads from --threads, capped to the usable cores (with a note)."""
    if threads:
        import torch

        from specchat.models.device.cores import capped_threads

        threads, note = capped_threads(threads)
        if note:
            click.echo(f"--threads: {note}", err=True)
        torch.set_num_threads(threads)


def parse_ks(text: str) -> list[int]:
    """The draft lengths of --ks, each 1 to K_MAX (engine/params.py)."""
    from specchat.engine.params import K_MAX, Bound

    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"--ks must list whole numbers like 2,3,4 (got {text!r})") from None
    problem = next(filter(None, (Bound(1, K_MAX).message("--ks", k) for k in ks)), None)
    if not ks or problem:
        raise UsageError(problem or f"--ks needs draft lengths of 1 or more (got {text!r})")
    return ks


def select(prompts: list[BenchPrompt], categories: tuple[str, ...], limit: int | None, path: Path):
    if categories:
        prompts = [p for p in prompts if p.category in categories]
        if not prompts:
            raise UsageError(f"{path}: no prompt has category {', '.join(categories)}")
    return prompts[:limit] if limit else prompts


@contextmanager
def prompt_bar(setup: Setup):
    """A progress bar over the prompt set; yields the callback for each prompt answered."""
    from specchat.commands.progress import StepBar, stderr_console

    bar = StepBar(stderr_console(), "prompts", len(setup.prompts), "prompt")

    def prompt_done(result: Any) -> None:
        rates = "  ".join(f"{key} {run.tokens_per_s:.1f}" for key, run in result.runs.items())
        bar.advance(f"[{result.prompt.id}] tokens/s: {rates}", keep=True)

    try:
        yield prompt_done
    finally:
        bar.close()


def print_report(report: Any, as_json: bool, html_file: Path | None = None) -> None:
    click.echo(json.dumps(report.as_dict(), indent=1) if as_json else report.format())
    if html_file is not None:
        write_html(report.as_dict(), html_file)


def check_writable(html_file: Path | None) -> None:
    """--html's folder exists and takes a file: said before the run, not after an hour of it."""
    if html_file is not None:
        check_output_file("--html", html_file)


def write_html(report: dict, html_file: Path) -> None:
    from specchat.bench.html_report import to_html

    try:
        html_file.write_text(to_html(report), encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--html {html_file}: {error.strerror or error}") from None
    click.echo(f"wrote {html_file}", err=True)
