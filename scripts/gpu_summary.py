"""Summarise scripts/gpu_measure.sh's results as Markdown: every table, and each target
of the Performance sections (issues 5, 13, 14) marked met / MISSED / not measured.

usage: python3 scripts/gpu_summary.py results.jsonl device.txt > summary.md
       python3 scripts/gpu_summary.py publish [--dry-run] DIR...
           DIR: a phase's returned $OUT (device.txt, results.jsonl, scale.jsonl). Writes
           every object to docs/gpu/<date>-<device>.jsonl and the tables into
           docs/benchmarks.md between the gpu-results markers (--dry-run: under /tmp).
"""

from __future__ import annotations

import json
import sys


def load(path: str) -> dict:
    steps = {}
    with open(path) as handle:
        for line in handle:
            if line.strip():
                entry = json.loads(line)
                steps[entry["step"]] = entry
    return steps


def verdict(value, threshold: float, higher: bool = True) -> str:
    if value is None:
        return "not measured"
    ok = value >= threshold if higher else value <= threshold
    return f"{value:.3f} ({'met' if ok else 'MISSED'}, target {'≥' if higher else '≤'} {threshold})"


def standard_section(name: str, entry: dict) -> list[str]:
    from specchat.bench.format import format_report

    report = entry["report"]
    if "total" not in report:
        return [f"### {name}: no report (exit {entry['exit']})", "```", str(report)[-3000:], "```"]
    ratios = report["total"]["ratios"]
    return [f"### {name}", f"`{entry['command']}` ({entry['seconds']} s)", "",
            f"- target-only / transformers generate: {verdict(ratios.get('target/hf'), 3.0)}",
            f"- speculative / transformers speculation: {verdict(ratios.get('spec/hf_spec'), 2.0)}",
            f"- speculative / target-only: {verdict(ratios.get('spec/target'), 1.0)}",
            "", "```", format_report(report), "```"]


def overhead_section(entry: dict) -> list[str]:
    report = entry["report"]
    if "overhead" not in report:
        return ["### overhead: no report", "```", str(report)[-3000:], "```"]
    share = report["overhead"]["speculative"]["outside_forward_share"]
    lines = [f"### time outside model forwards", f"`{entry['command']}`", "",
             f"- speculative, share of a round outside forwards: {verdict(share, 0.10, higher=False)}",
             f"- target-only: {report['overhead']['target_only']['outside_forward_share']:.3f}",
             "", "```", report.get("profiler_table", "")[:6000], "```"]
    return lines


def sweep_section(entry: dict) -> list[str]:
    from specchat.bench.profile import format_profile
    from specchat.bench.sweep import format_sweep

    report = entry["report"]
    if "sweep" not in report:
        return ["### sweep: no report", "```", str(report)[-3000:], "```"]
    lines = [f"### k = auto vs fixed k", f"`{entry['command']}`", ""]
    for name, row in report["sweep"].items():
        lines.append(f"- {name}: best fixed k = {row['best_k']}, auto/best "
                     f"{verdict(row.get('auto_vs_best'), 0.95)}")
    lines += ["", "```", format_sweep(report)]
    if "profile" in report:
        lines += ["", format_profile(report["profile"])]
    return lines + ["```"]


def other_section(name: str, entry: dict) -> list[str]:
    report = entry["report"]
    if name == "synthetic" and "models" in report:
        from specchat.bench.synthetic import format_synthetic

        body = format_synthetic(report)
    else:
        body = report.get("output", json.dumps(report)[:4000])
    return [f"### {name} (exit {entry['exit']}, {entry['seconds']} s)", f"`{entry['command']}`",
            "", "```", body.strip()[-6000:], "```"]


def main(results: str, device: str) -> None:
    print("## GPU results\n\n```\n" + open(device).read().strip() + "\n```\n")
    print("\n".join(step_sections(load(results))))


def step_sections(steps: dict) -> list[str]:
    out = []
    for name, entry in steps.items():
        if name.startswith("standard"):
            lines = standard_section(name, entry)
        elif name.startswith("overhead"):
            lines = overhead_section(entry)
        elif name.startswith("sweep"):
            lines = sweep_section(entry)
        else:
            lines = other_section(name, entry)
        out += lines + [""]
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["publish"]:
        from gpu_publish import publish

        publish(sys.argv[2:])
    else:
        main(*sys.argv[1:3])
