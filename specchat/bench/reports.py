"""The typed reports of the bench subcommands: each knows its JSON form (`as_dict`,
what --json prints) and its text form (`format`), so no printer has to guess a
report's kind from which keys it holds.

- `ComparisonReport` (`bench run`): every arm per prompt, per category, in total.
- `SweepReport` (`bench sweep`, and `bench profile` with its cost model).
- `OverheadReport` (`bench overhead`), `SyntheticReport` (`bench synthetic`).

Knows nothing about models or timing: the numbers come in measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class RunMeta:
    """What was measured, where and how: the header of every prompt-set report."""

    command: str
    pair: str
    target: str
    draft: str
    k: int | str
    device: str
    dtype: str
    adapter: str
    torch_threads: int
    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    prompts_file: str
    prompt_count: int
    backends: dict = field(default_factory=dict)
    """What computed each model's logits ({"target": "llama.cpp (...)", "draft": "torch (lean)"})."""
    repeats: int = 1
    """Answers per arm and prompt, interleaved; each arm's median-time run is reported."""
    cpu_flags: str = ""
    """The CPU's vector extensions that decide its speed (avx2, avx512f, avx512_bf16, amx...),
    so that records from different machines are not compared unawares."""
    prompts_left: int = 0
    """Prompts of the set not answered because `--budget-s` was spent (`prompt_count` counts
    those answered, every arm on each)."""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ComparisonReport:
    """`bench run`: arms side by side; `tables` is tables.build_tables's per-prompt,
    per-category and total entries (arms, prompts, categories, total)."""

    meta: RunMeta
    tables: dict

    def as_dict(self) -> dict:
        return {**self.meta.as_dict(), **self.tables}

    def format(self) -> str:
        from specchat.bench.format import format_report

        return format_report(self.as_dict())


@dataclass
class SweepReport(ComparisonReport):
    """`bench sweep` / `bench profile`: fixed k against auto and transformers' heuristic."""

    sweep: dict = field(default_factory=dict)
    auto_k_histogram: dict[int, int] = field(default_factory=dict)
    profile: dict | None = None
    """The cost model (`bench profile` only)."""

    def as_dict(self) -> dict:
        out = {**super().as_dict(), "sweep": self.sweep, "auto_k_histogram": self.auto_k_histogram}
        return out if self.profile is None else {**out, "profile": self.profile}

    def format(self) -> str:
        from specchat.bench.format import header_lines
        from specchat.bench.sweep import format_sweep

        data = self.as_dict()
        text = "\n".join(header_lines(data)) + "\n\n" + format_sweep(data)
        if self.profile is None:
            return text
        from specchat.bench.profile import format_profile

        return text + "\n\n" + format_profile(self.profile)


@dataclass
class OverheadReport:
    """`bench overhead`: the share of each answer spent outside model forwards."""

    meta: RunMeta
    speculative: dict
    target_only: dict
    profiler_table: str

    def as_dict(self) -> dict:
        return {**self.meta.as_dict(), "profiler_table": self.profiler_table,
                "overhead": {"speculative": self.speculative, "target_only": self.target_only}}

    def format(self) -> str:
        lines = ["time outside model forwards (wall time of the answers minus time inside forwards):"]
        for mode, r in (("speculative", self.speculative), ("target_only", self.target_only)):
            lines.append(f"  {mode:<12} {r['rounds']} rounds, {r['tokens']} tokens, "
                         f"{r['ms_per_round']:.2f} ms/round of which forwards "
                         f"{r['forward_ms_per_round']:.2f} ms: outside = "
                         f"{100 * (r['outside_forward_share'] or 0):.1f}%")
        return ("\n".join(lines) + "\n\ntorch.profiler, one speculative answer:\n"
                + self.profiler_table)


@dataclass
class SyntheticReport:
    """`bench synthetic`: verify cost vs tokens on random models of real Llama shapes."""

    measured: dict
    """synthetic.profile_synthetic's result, with the device named."""

    def as_dict(self) -> dict:
        return self.measured

    def format(self) -> str:
        from specchat.bench.synthetic import format_synthetic

        return format_synthetic(self.measured)
