"""Publish returned GPU results: every JSON object into docs/gpu/<date>-<device>.jsonl, and
the tables (scripts/gpu_summary.py's step sections + the real-scale tables made here)
into docs/benchmarks.md between `<!-- gpu-results:start -->` and `<!-- gpu-results:end -->`.

usage: python3 scripts/gpu_summary.py publish [--dry-run] DIR...   (--dry-run: under /tmp)
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- gpu-results:start -->", "<!-- gpu-results:end -->"
GB = 1e9


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verdict(value, threshold: float, higher: bool = True) -> str:
    if value is None:
        return "not measured"
    ok = value >= threshold if higher else value <= threshold
    return f"{value:.2f} ({'met' if ok else 'MISSED'}, target {'≥' if higher else '≤'} {threshold})"


def model_table(models: list[dict]) -> list[str]:
    lines = ["| model | quant | layers | weights read/token | GPU memory | capture | step ms | "
             "decode GB/s | share of copy (≥ 0.60) |", "|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        memory = f"{m['gpu_memory_bytes'] / GB:.2f} GB" if m.get("gpu_memory_bytes") else "n/a"
        capture = f"{m['capture_s']:.1f} s" if m.get("captured") else f"eager ({m.get('compile_error') or 'CPU'})"[:60]
        lines.append(f"| {m['shape']}{' (tiny)' if m.get('tiny') else ''} | {m['quant']} | {m['layers']} | "
                     f"{m['weight_bytes_per_token'] / GB:.3f} GB | {memory} | {capture} | "
                     f"{m['step_ms']:.2f} | {m['bandwidth_bytes_per_s'] / GB:.0f} | "
                     f"{verdict(m.get('bandwidth_share_of_copy'), 0.60) if m['quant'] == 'none' else m.get('bandwidth_share_of_copy', 0):{''}} |")
    return lines


def v_table(models: list[dict]) -> list[str]:
    widths = list(range(1, 17))
    lines = ["| model | quant | " + " | ".join(f"v({n})" for n in widths) + " |",
             "|---|---|" + "---|" * len(widths)]
    for m in models:
        cells = " | ".join(f"{m['v'].get(str(n), m['v'].get(n, 0)):.2f}" for n in widths)
        lines.append(f"| {m['shape']} | {m['quant']} | {cells} |")
    return lines


def spec_lines(specs: list[dict]) -> list[str]:
    lines = []
    for s in specs:
        if "error" in s or "skipped" in s:
            lines.append(f"- spec run failed: {s.get('error') or s.get('skipped')}")
            continue
        lines.append(f"- {s['target']} target, draft {s['draft']}, k = {s['k']}: target-only "
                     f"{s['target_only_tok_s']:.1f} tok/s, speculative {s['spec_tok_s']:.1f} tok/s, "
                     f"measured speedup {s['measured_speedup']:.2f}x at α = {s['alpha']}, "
                     f"c = {s['c']:.3f}, v({s['k'] + 1}) = {s['v']:.2f}")
        if "predicted_speedup" in s:
            lines.append(f"  - cost model at the same α, c, v: {s['predicted_speedup']:.2f}x "
                         "(the gap is the engine's overhead)")
        for alpha, value in (s.get("predicted_at") or {}).items():
            lines.append(f"  - predicted at α = {alpha}: {value:.2f}x at k = {s['k']} "
                         f"(best k {s['best_k_at'][alpha]})")
        if s.get("syncs_per_round") is not None:
            lines.append(f"  - host syncs per round: {verdict(s['syncs_per_round'], 1.0, higher=False)}")
    return lines


def quant_lines(models: list[dict]) -> list[str]:
    """Where a quantized target makes speculation lose, and why (its step got cheaper or dearer)."""
    from specchat.theory import ideal_speedup

    steps = {(m["shape"], m["quant"]): m for m in models}
    draft = steps.get(("1b", "none"))
    if draft is None:
        return []
    lines = []
    for quant in ("none", "8bit", "4bit"):
        target = steps.get(("8b", quant))
        if target is None:
            continue
        c = draft["step_ms"] / target["step_ms"]
        best = max(range(1, 9), key=lambda k: ideal_speedup(0.7, k, c, target["v"][str(k + 1)]
                                                            if str(k + 1) in target["v"] else target["v"][k + 1]))
        v = target["v"].get(str(best + 1), target["v"].get(best + 1))
        speed = ideal_speedup(0.7, best, c, v)
        word = "pays" if speed > 1 else "LOSES"
        lines.append(f"- 8B target {quant}, bf16 1B draft: c = {c:.3f}, best k = {best}, predicted "
                     f"{speed:.2f}x at α = 0.7: speculation {word} (target step {target['step_ms']:.2f} ms)")
    return lines


def scale_sections(records: list[dict]) -> list[str]:
    if not records:
        return []
    copy = next((r for r in records if r["kind"] == "copy" and "bandwidth_bytes_per_s" in r), None)
    models = [r for r in records if r["kind"] == "model" and "step_ms" in r]
    failed = [r for r in records if r["kind"] == "model" and "step_ms" not in r]
    lines = [f"### Real scale (random weights, Llama-3.2-1B / Llama-3.1-8B shapes), {records[0]['device']}",
             f"`{records[0]['command']}`", ""]
    if copy:
        lines.append(f"device-to-device copy: {copy['bandwidth_bytes_per_s'] / GB:.0f} GB/s (read + written)")
    lines += ["", *model_table(models), "", "verify cost v(n) = time(n tokens) / time(1 token):", "",
              *v_table(models), ""]
    lines += [f"- {r.get('shape', '')} {r.get('quant', '')}: {r.get('error') or r.get('skipped')}"
              for r in failed]
    lines += ["", *spec_lines([r for r in records if r["kind"] == "spec"]), "", *quant_lines(models)]
    return lines


def device_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def publish(argv: list[str]) -> None:
    from gpu_summary import step_sections

    dry = "--dry-run" in argv
    dirs = [Path(a) for a in argv if a != "--dry-run"]
    steps, scale, devices = {}, [], []
    for folder in dirs:
        for entry in read_jsonl(folder / "results.jsonl"):
            steps[entry["step"]] = entry
        scale += read_jsonl(folder / "scale.jsonl")
        if (folder / "device.txt").is_file():
            devices.append((folder / "device.txt").read_text().strip())
    name = next((r["device"] for r in scale), None) or next((e.get("device") for e in steps.values()), "device")
    stamp = datetime.date.today().isoformat()
    out_dir = Path("/tmp/specchat-gpu-publish") if dry else ROOT / "docs" / "gpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / f"{stamp}-{device_slug(name)}.jsonl"
    raw.write_text("".join(json.dumps(o) + "\n" for o in [*steps.values(), *scale]))
    body = [START, f"## GPU results: {name}, {stamp}", "", f"Raw results: `docs/gpu/{raw.name}`", "",
            "```", *devices, "```", "", *scale_sections(scale), "",
            *step_sections({k: v for k, v in steps.items() if k != "scale"}), END]
    target = (out_dir / "benchmarks.md") if dry else ROOT / "docs" / "benchmarks.md"
    source = (ROOT / "docs" / "benchmarks.md").read_text()
    target.write_text(replace_block(source, "\n".join(body)))
    print(f"wrote {raw} and the tables into {target}")


def replace_block(text: str, block: str) -> str:
    """The text with the marked block replaced, or the block added after the GPU section's heading."""
    if START in text and END in text:
        return text[: text.index(START)] + block + text[text.index(END) + len(END):]
    heading = text.find("\n## UI")
    if heading < 0:
        return text.rstrip() + "\n\n" + block + "\n"
    return text[:heading] + "\n" + block + "\n" + text[heading:]


if __name__ == "__main__":
    publish(sys.argv[1:])
