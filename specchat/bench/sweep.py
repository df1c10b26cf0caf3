"""Draft-length sweep: specchat at fixed k = 2..8, k = "auto" and transformers'
heuristic schedule, per category, next to target-only. Names the best fixed k of
each category and how close "auto" comes to it. Reads the tables that
`tables.build_tables` makes from the sweep's arms; knows nothing about models.
"""

from __future__ import annotations

from specchat.bench.format import SHORT, fmt, rounded, table
from specchat.engine.theory import measured_speedup


def fixed_keys(report: dict) -> list[str]:
    return [key for key in report["arms"] if key.startswith("k") and key[1:].isdigit()]


def sweep_entry(group: dict, fixed: list[str]) -> dict:
    """Best fixed k of one group, and auto's and the heuristic's rates against it."""
    rate = {key: arm["tokens_per_s"] or 0.0 for key, arm in group["arms"].items()}
    best = max(fixed, key=lambda key: rate[key])
    out = {"best_k": int(best[1:]), "best_tokens_per_s": rate[best],
           "best_vs_target": rounded(measured_speedup(rate[best], rate.get("target")))}
    for other in ("auto", "hf_heuristic"):
        if other in rate:
            out[f"{other}_tokens_per_s"] = rate[other]
            out[f"{other}_vs_best"] = rounded(measured_speedup(rate[other], rate[best]))
    if "auto" in rate:
        out["auto_vs_target"] = rounded(measured_speedup(rate["auto"], rate.get("target")))
    return out | llama_ratios(rate, fixed)


def llama_ratios(rate: dict, fixed: list[str]) -> dict:
    """specchat at each fixed k over llama.cpp's own speculation at that k (`lcpp_draft_k3`,
    `lcpp_ngram-simple_k3`, ...), and target-only over llama-bench, where they ran."""
    out: dict = {}
    for key in fixed:
        for other in (k for k in rate if k.startswith("lcpp_") and k.endswith(f"_{key}")):
            if rate[other]:
                name = other.removeprefix("lcpp_").removesuffix(f"_{key}")
                out.setdefault("vs_llama", {})[f"{key}/{name}"] = rounded(
                    measured_speedup(rate[key], rate[other]))
    if rate.get("llama_bench") and rate.get("target"):
        out["target_vs_llama_bench"] = rounded(measured_speedup(rate["target"], rate["llama_bench"]))
    return out


def sweep_section(tables: dict) -> dict:
    """The sweep's verdict per category and in total, from the arms' tables."""
    fixed = fixed_keys(tables)
    groups = {**tables["categories"], "TOTAL": tables["total"]}
    return {name: sweep_entry(group, fixed) for name, group in groups.items()}


def format_sweep(report: dict) -> str:
    keys = list(report["arms"])
    header = ["category"] + [SHORT.get(key, key) for key in keys] + [
        "best k", "best/tgt", "auto/best", "heuristic/best"]
    rows = [header]
    groups = {**report["categories"], "TOTAL": report["total"]}
    for name, group in groups.items():
        entry = report["sweep"][name]
        rows.append([name] + [fmt(group["arms"][k]["tokens_per_s"]) for k in keys] + [
            str(entry["best_k"]), fmt(entry["best_vs_target"], 2, "x"),
            fmt(entry.get("auto_vs_best"), 2, "x"), fmt(entry.get("hf_heuristic_vs_best"), 2, "x")])
    auto_ks = report.get("auto_k_histogram")
    lines = ["tokens/s by draft length (same prompts, alternating order, one run):", table(rows)]
    lines += llama_lines(report["sweep"])
    if auto_ks:
        lines.append("k asked by auto per round (k=0 only for the last token of a budget): "
                     + ", ".join(f"k={k}: {n}" for k, n in auto_ks.items()))
    return "\n".join(lines)


def llama_lines(sweep: dict) -> list[str]:
    """specchat against llama.cpp's own programs per category, where they ran."""
    ratios = sorted({name for entry in sweep.values() for name in entry.get("vs_llama", {})})
    if not ratios and not any("target_vs_llama_bench" in e for e in sweep.values()):
        return []
    rows = [["category", "tgt/llama-bench", "auto/tgt"] + ratios]
    for name, entry in sweep.items():
        rows.append([name, fmt(entry.get("target_vs_llama_bench"), 2, "x"),
                     fmt(entry.get("auto_vs_target"), 2, "x")]
                    + [fmt(entry.get("vs_llama", {}).get(r), 2, "x") for r in ratios])
    return ["", "against llama.cpp's own programs (kN/NAME: specchat at k=N over "
                "llama-speculative-simple NAME at k=N):", table(rows)]
