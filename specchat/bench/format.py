"""Text tables for a benchmark report (the dict `tables.build_tables` returns):
one row per prompt, then one per category and the total. Plain text, no colour,
so the output pastes into docs/benchmarks.md as is. Also how a report's numbers are
rounded (`rounded`: the tables' and the sweep's). Standard library only.
"""

from __future__ import annotations

SHORT = {"spec": "spec", "target": "tgt", "hf": "hf", "hf_spec": "hf-spec", "llama": "lcpp",
         "llama_spec": "lcpp-spec", "llama_bench": "lbench", "lcpp_draft": "lss-draft",
         "lcpp_ngram-simple": "lss-ngram-simple", "lcpp_ngram-map-k": "lss-ngram-map-k"}
"""Column names of the arms (lss: llama.cpp's llama-speculative-simple program)."""
SHOWN_RATIOS = ("spec/target", "spec/hf_spec", "target/hf")
LLAMA_RATIOS = ("spec/target", "spec/llama_spec", "target/llama")
"""The ratios shown when the baselines are llama.cpp's (bench/llamacpp_arms.py)."""
PROGRAM_RATIOS = ("target/llama_bench", "spec/lcpp_draft", "spec/lcpp_ngram-simple",
                  "spec/lcpp_ngram-map-k")
"""Shown as well where llama.cpp's own programs ran (bench/llama_programs.py)."""


def shown_ratios(keys: list[str]) -> tuple[str, ...]:
    base = LLAMA_RATIOS if "llama" in keys else SHOWN_RATIOS
    return base + tuple(r for r in PROGRAM_RATIOS if r.split("/")[1] in keys)


def short_ratio(ratio: str) -> str:
    return "/".join(SHORT.get(key, key) for key in ratio.split("/"))


def fmt(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def rounded(value: float | None, digits: int = 3) -> float | None:
    """`value` rounded as a report stores it; None stays None."""
    return None if value is None else round(value, digits)


def header_row(keys: list[str]) -> list[str]:
    return (["name", "n", "tokens"] + [f"{SHORT.get(k, k)} t/s" for k in keys]
            + ["acc", "tau"] + [short_ratio(r) for r in shown_ratios(keys)] + ["greedy = tgt"])


def same_cell(entry: dict, keys: list[str]) -> str:
    parts = []
    for key in keys:
        same = entry["arms"][key].get("identical")
        if same is None:
            continue
        if entry["prompts"] == 1:
            if not same["identical"]:
                parts.append(f"{SHORT.get(key, key)}@{entry['arms'][key].get('first_difference')}")
        else:
            parts.append(f"{SHORT.get(key, key)} {same['identical']}/{same['answers']}")
    if entry["prompts"] == 1:
        return "yes" if not parts else "differs: " + " ".join(parts)
    return " ".join(parts) or "-"


def row(name: str, entry: dict, keys: list[str], greedy: bool) -> list[str]:
    spec = entry["arms"].get("spec", {})
    cells = [name, str(entry["prompts"]), str(entry["arms"]["target"]["tokens"])]
    cells += [fmt(entry["arms"][k]["tokens_per_s"]) for k in keys]
    cells += [fmt(spec.get("acceptance_rate"), 2), fmt(spec.get("mean_acceptance_length"), 2)]
    cells += [fmt(entry["ratios"].get(r), 2, "x") for r in shown_ratios(keys)]
    cells.append(same_cell(entry, keys) if greedy else "n/a (sampling)")
    return cells


def table(rows: list[list[str]], text_last: bool = False) -> str:
    """Aligned columns: numbers to the right, the first column (and a text last one) to the left."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    left = {0, len(widths) - 1} if text_last else {0}
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def header_lines(report: dict) -> list[str]:
    """What was measured, where, and with which arms."""
    return [f"pair {report['pair']} ({report['draft']}, k={report['k']})  device {report['device']}"
             f"  dtype {report['dtype']}  max_new_tokens {report['max_new_tokens']}"
             f"  temperature {report['temperature']}",
             f"adapter {report.get('adapter', '?')}, torch threads {report.get('torch_threads', '?')}"
             + repeats_note(report.get("repeats", 1))
             + (f"; CPU flags {report['cpu_flags']}" if report.get("cpu_flags") else "")
             + budget_note(report),
             "arms: " + "; ".join(f"{SHORT.get(k, k)} = {label}" for k, label in report["arms"].items())]


def budget_note(report: dict) -> str:
    """Where --budget-s ended the run before the prompt set did."""
    left = report.get("prompts_left", 0)
    if not left:
        return ""
    answered = report.get("prompt_count", 0)
    return f"; --budget-s spent: {answered} of {answered + left} prompts answered"


def repeats_note(repeats: int) -> str:
    return f", {repeats} interleaved answers per arm and prompt (median time kept)" if repeats > 1 else ""


def format_report(report: dict) -> str:
    keys = list(report["arms"])
    greedy = report["temperature"] == 0
    lines = header_lines(report) + ["", "per prompt:"]
    lines.append(table([header_row(keys)] + [row(p["id"], p, keys, greedy) for p in report["prompts"]],
                       text_last=True))
    lines += ["", "per category and total:"]
    groups = [row(name, entry, keys, greedy) for name, entry in report["categories"].items()]
    lines.append(table([header_row(keys)] + groups + [row("TOTAL", report["total"], keys, greedy)],
                       text_last=True))
    return "\n".join(lines + outside_llama_lines(report["total"], keys))


def outside_llama_lines(total: dict, keys: list[str]) -> list[str]:
    """Time per token outside llama.cpp's decode calls, for the arms that timed it."""
    cells = [f"{SHORT.get(k, k)} {total['arms'][k]['outside_llama_ms_per_token']:.2f} ms"
             for k in keys if total["arms"][k].get("outside_llama_ms_per_token") is not None]
    if not cells:
        return []
    return ["", "time outside llama.cpp per token (total over the prompts): " + ", ".join(cells)]
