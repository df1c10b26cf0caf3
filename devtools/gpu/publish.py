"""`python -m devtools publish DIR...`: a campaign's returned folders (results.jsonl, scale.jsonl,
device.txt) into the repository: every raw object into docs/gpu/DATE-DEVICE.jsonl, and
the tables into docs/benchmarks.md between the `gpu-results` markers, each target of the GPU
issue marked met, MISSED or not measured.

The targets: target-only ≥ 3× transformers `generate` and speculative ≥ 2× transformers'
assisted generation (built-in pair, bf16); time outside model forwards ≤ 10% of a round;
one host sync per round; decode bandwidth ≥ 60% of the device-to-device copy; k = "auto"
within 5% of the best fixed k. Pure text from JSON: no torch, no models; c and v(n) of a
recorded model are engine.costs' `Costs`, the best k engine.theory's.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

from specchat.engine.costs import WIDTHS, Costs
from specchat.errors import UsageError

START, END = "<!-- gpu-results:start -->", "<!-- gpu-results:end -->"
GB = 1e9


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verdict(value: float | None, threshold: float, higher: bool = True) -> str:
    if value is None:
        return "not measured"
    ok = value >= threshold if higher else value <= threshold
    return f"{value:.2f} ({'met' if ok else 'MISSED'}, target {'≥' if higher else '≤'} {threshold})"


def v_of(figures: dict, n: int) -> float | None:
    """v(n) from a record (keys are strings after a JSON round trip); None if not timed."""
    table = figures["v"]
    return table.get(str(n), table.get(n))


def recorded_costs(target: dict, draft: dict) -> Costs:
    """The step costs of a `scale` target record with a draft record's one-token step
    as the drafter's (keys of verify_ms are strings after a JSON round trip)."""
    verify_s = {int(n): ms / 1000 for n, ms in target["verify_ms"].items()}
    return Costs.of(verify_s, draft["step_ms"] / 1000)


def failed_step(name: str, entry: dict) -> list[str]:
    report = entry["report"]
    detail = report.get("stderr") or report.get("output") or json.dumps(report)
    return [f"### {name}: no report (exit {entry['exit']}, {entry['seconds']} s)",
            f"`{entry['command']}`", "", "```", str(detail).strip()[-3000:], "```"]


def standard_section(name: str, entry: dict) -> list[str]:
    from specchat.bench.format import format_report

    report = entry["report"]
    if "total" not in report:
        return failed_step(name, entry)
    ratios = report["total"]["ratios"]
    return [f"### {name}", f"`{entry['command']}` ({entry['seconds']} s)", "",
            *(llama_lines(ratios) if "target/llama" in ratios else transformers_lines(ratios)),
            f"- speculative / target-only: {verdict(ratios.get('spec/target'), 1.0)}",
            "", "```", format_report(report), "```"]


def transformers_lines(ratios: dict) -> list[str]:
    """The issue's targets against transformers, whose arms run eagerly (bench/arms.py)."""
    return [f"- target-only / transformers generate (eager): {verdict(ratios.get('target/hf'), 3.0)}",
            "- speculative / transformers assisted generation at the same k (eager): "
            f"{verdict(ratios.get('spec/hf_spec'), 2.0)}"]


def llama_lines(ratios: dict) -> list[str]:
    """A llama.cpp pair against llama.cpp's own ways to run it (no target: measured only)."""
    shown = {"target/llama": "target-only / llama.cpp generate (bindings)",
             "spec/llama_spec": "speculative / llama.cpp speculation (bindings)",
             "target/llama_bench": "target-only / llama-bench",
             "spec/lcpp_draft": "speculative / llama-speculative-simple with the draft"}
    return [f"- {label}: {ratios[key]:.2f}" for key, label in shown.items()
            if ratios.get(key) is not None]


def overhead_section(name: str, entry: dict) -> list[str]:
    report = entry["report"]
    if "overhead" not in report:
        return failed_step(name, entry)
    share = report["overhead"]["speculative"].get("outside_forward_share")
    alone = report["overhead"]["target_only"].get("outside_forward_share")
    return ["### time outside model forwards", f"`{entry['command']}`", "",
            f"- speculative, share of a round outside forwards: {verdict(share, 0.10, higher=False)}",
            f"- target-only: {number(alone, '.3f')}",
            "", "```", report.get("profiler_table", "")[:6000], "```"]


def sweep_section(name: str, entry: dict) -> list[str]:
    from specchat.bench.profile import format_profile
    from specchat.bench.sweep import format_sweep

    report = entry["report"]
    if "sweep" not in report:
        return failed_step(name, entry)
    lines = [f"### {name}: k = auto vs fixed k", f"`{entry['command']}`", ""]
    for category, row in report["sweep"].items():
        lines.append(f"- {category}: best fixed k = {row.get('best_k', 'n/a')}, auto/best "
                     f"{verdict(row.get('auto_vs_best'), 0.95)}")
    lines += ["", "```", format_sweep(report)]
    if "profile" in report:
        lines += ["", format_profile(report["profile"])]
    return lines + ["```"]


def other_section(name: str, entry: dict) -> list[str]:
    report = entry["report"]
    if entry["exit"] != 0:
        return failed_step(name, entry)
    body = report.get("output", json.dumps(report)[:4000])
    return [f"### {name} ({entry['seconds']} s)", f"`{entry['command']}`", "", "```",
            str(body).strip()[-6000:], "```"]


SECTIONS = (("standard", standard_section), ("llama-standard", standard_section),
            ("llama-spec", standard_section), ("overhead", overhead_section),
            ("sweep", sweep_section), ("llama-profile", sweep_section))


def step_sections(steps: dict[str, dict]) -> list[str]:
    out = []
    for name, entry in steps.items():
        section = next((f for prefix, f in SECTIONS if name.startswith(prefix)), other_section)
        out += section(name, entry) + [""]
    return out


def model_row(m: dict) -> str:
    memory = f"{m['gpu_memory_bytes'] / GB:.2f} GB" if m.get("gpu_memory_bytes") else "n/a"
    capture = capture_text(m)
    share = m.get("bandwidth_share_of_copy")
    shown = verdict(share, 0.60) if m["quant"] == "none" else ("-" if share is None else f"{share:.2f}")
    return (f"| {m['shape']}{' (tiny)' if m.get('tiny') else ''} | {m['quant']} | {m['layers']} | "
            f"{m['weight_bytes_per_token'] / GB:.3f} GB | {memory} | {capture} | "
            f"{m['step_ms']:.2f} | {m['bandwidth_bytes_per_s'] / GB:.1f} | {shown} |")


def capture_text(m: dict) -> str:
    """How a model's steps ran: captured (and in how long), or eager and why."""
    if m.get("captured"):
        return f"{m['capture_s']:.1f} s"
    if m.get("compile_error"):
        return f"eager ({m['compile_error']})"[:60]
    if m.get("forward") == "HFCausalModel":
        return "transformers eager (quantized)"
    return "eager (no CUDA)"


def model_table(models: list[dict]) -> list[str]:
    return ["| model | quant | layers | weights read/token | GPU memory | capture | step ms | "
            "decode GB/s | share of copy (≥ 0.60) |", "|---|---|---|---|---|---|---|---|---|",
            *map(model_row, models)]


def v_table(models: list[dict]) -> list[str]:
    lines = ["| model | quant | " + " | ".join(f"v({n})" for n in WIDTHS) + " |",
             "|---|---|" + "---|" * len(WIDTHS)]
    for m in models:
        cells = ("-" if v_of(m, n) is None else f"{v_of(m, n):.2f}" for n in WIDTHS)
        lines.append(f"| {m['shape']} | {m['quant']} | " + " | ".join(cells) + " |")
    return lines


def number(value: float | None, spec: str) -> str:
    """A figure of a record, or "n/a" where the run could not measure it."""
    return "n/a" if value is None else format(value, spec)


def spec_lines(specs: list[dict]) -> list[str]:
    lines = []
    for s in specs:
        if "error" in s or "skipped" in s:
            lines.append(f"- spec run failed: {s.get('error') or s.get('skipped')}")
            continue
        lines.append(f"- {s['target']} target, draft {s['draft']}, k = {s['k']}: target-only "
                     f"{number(s.get('target_only_tok_s'), '.1f')} tok/s, speculative "
                     f"{number(s.get('spec_tok_s'), '.1f')} tok/s, measured speedup "
                     f"{number(s.get('measured_speedup'), '.2f')}x at α = "
                     f"{number(s.get('alpha'), '.3f')}, c = {number(s.get('c'), '.3f')}, "
                     f"v({s['k'] + 1}) = {number(s.get('v'), '.2f')}")
        if s.get("predicted_speedup") is not None:
            lines.append(f"  - cost model at the same α, c, v: {s['predicted_speedup']:.2f}x "
                         "(the gap is the engine's overhead)")
        for alpha, value in (s.get("predicted_at") or {}).items():
            lines.append(f"  - predicted at α = {alpha}: {value:.2f}x at k = {s['k']} "
                         f"(best k {s['best_k_at'][alpha]})")
        if s.get("syncs_per_round") is not None:
            places = ", ".join(f"{place} ×{n}"
                               for place, n in (s.get("sync_places") or {}).items())
            syncs = verdict(s["syncs_per_round"], 1.0, higher=False)
            lines.append(f"  - host syncs per round: {syncs}"
                         + (f" (made at {places})" if places else ""))
    return lines


def quantized_lines(models: list[dict], alpha: float = 0.7) -> list[str]:
    """Whether a quantized 8B target still gains from the bf16 1B draft, per the cost model."""
    from specchat.engine.theory import best_k

    steps = {(m["shape"], m["quant"]): m for m in models}
    draft, lines = steps.get(("1b", "none")), []
    for quant in ("none", "8bit", "4bit"):
        target = steps.get(("8b", quant))
        if draft is None or target is None:
            continue
        costs = recorded_costs(target, draft)
        c = costs.c
        assert c is not None, "recorded_costs prices the draft's step"
        k, speed = best_k(alpha, c, costs.v, k_max=max(costs.widths) - 1)
        word = "pays" if speed > 1 else "LOSES"
        lines.append(f"- 8B target {quant}, bf16 1B draft: c = {c:.3f}, best k = {k}, predicted "
                     f"{speed:.2f}x at α = {alpha}: speculation {word} "
                     f"(target step {target['step_ms']:.2f} ms)")
    return lines


def scale_sections(records: list[dict]) -> list[str]:
    if not records:
        return []
    copy = next((r for r in records if r["kind"] == "copy" and "bandwidth_bytes_per_s" in r), None)
    models = [r for r in records if r["kind"] == "model" and "step_ms" in r]
    failed = [r for r in records if r["kind"] == "model" and "step_ms" not in r]
    lines = ["### Real scale (random weights, Llama-3.2-1B / Llama-3.1-8B shapes)",
             f"`{records[0]['command']}`", ""]
    if copy:
        lines.append(f"device-to-device copy: {copy['bandwidth_bytes_per_s'] / GB:.1f} GB/s "
                     "(read + written)")
    lines += ["", *model_table(models), "", "verify cost v(n) = time(n tokens) / time(1 token):",
              "", *v_table(models), ""]
    lines += [f"- {r.get('shape', '')} {r.get('quant', '')}: {r.get('error') or r.get('skipped')}"
              for r in failed]
    return lines + ["", *spec_lines([r for r in records if r["kind"] == "spec"]), "",
                    *quantized_lines(models)]


def device_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def gathered(folders: list[Path]) -> tuple[dict[str, dict], list[dict], list[str]]:
    """(steps by name, scale records, device descriptions) of the returned folders."""
    steps, scale, devices = {}, [], []
    for folder in folders:
        for entry in read_jsonl(folder / "results.jsonl"):
            steps[entry["step"]] = entry
        scale += read_jsonl(folder / "scale.jsonl")
        if (folder / "device.txt").is_file():
            devices.append((folder / "device.txt").read_text().strip())
    return steps, scale, list(dict.fromkeys(devices))


def device_of(steps: dict[str, dict], scale: list[dict]) -> str:
    return (next((e.get("device") for e in steps.values() if e.get("device")), None)
            or next((r["device"] for r in scale), "device"))


def results_block(name: str, steps: dict[str, dict], scale: list[dict], devices: list[str],
                  raw_path: str) -> str:
    """The Markdown between the markers: where, what, every table and target."""
    stamp = datetime.date.today().isoformat()
    return "\n".join([START, f"## GPU results: {name}, {stamp}", "",
                      f"Raw results: `{raw_path}`", "", "```", *devices, "```", "",
                      *scale_sections(scale), "", *step_sections(steps), END])


def publish(folders: list[Path], results_dir: Path, benchmarks: Path) -> tuple[Path, Path]:
    """Write the raw objects and the tables; (raw file, benchmarks file)."""
    steps, scale, devices = gathered(folders)
    if not steps and not scale:
        raise UsageError(f"no campaign results in {', '.join(map(str, folders))}: give the "
                         "folders the device calls returned (each holds results.jsonl or scale.jsonl)")
    name = device_of(steps, scale)
    raw = results_dir / f"{datetime.date.today().isoformat()}-{device_slug(name)}.jsonl"
    results_dir.mkdir(parents=True, exist_ok=True)
    raw.write_text("".join(json.dumps(o) + "\n" for o in [*steps.values(), *scale]))
    text = benchmarks.read_text() if benchmarks.is_file() else ""
    benchmarks.write_text(replace_block(text, results_block(name, steps, scale, devices, raw.as_posix())))
    return raw, benchmarks


def replace_block(text: str, block: str) -> str:
    """The text with the marked block replaced, or the block added before the UI section."""
    if START in text and END in text:
        return text[: text.index(START)] + block + text[text.index(END) + len(END):]
    heading = text.find("\n## UI")
    if heading < 0:
        return text.rstrip() + "\n\n" + block + "\n"
    return text[:heading] + "\n" + block + "\n" + text[heading:]
