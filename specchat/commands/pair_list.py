"""`specchat pairs`: the catalog's pairs with each model's availability, as records
(`--json`) and as the lines a person reads. Reads models.toml and the model caches;
loads no model.
"""

from __future__ import annotations

from typing import Any


def pair_records(catalog: Any) -> list[dict]:
    """Every pair as a JSON-ready record: its keys, whether it is the default, and each
    model's reference, availability offline and where it was looked for."""
    return [pair_record(name, pair, name == catalog.default)
            for name, pair in catalog.pairs.items()]


def pair_record(name: str, pair: Any, default: bool) -> dict:
    from specchat.models.config.refs import availability, parse_ref

    models = {}
    for role, ref in (("target", pair.target), ("draft", pair.draft)):
        if ref:
            ok, where = availability(parse_ref(ref))
            models[role] = {"ref": ref, "available": ok, "where": where}
    return {"name": name, "default": default, "description": pair.description, "k": pair.k,
            "drafter": drafter(pair.draft),
            "backend": pair.backend, "dtype": pair.dtype, "device": pair.device,
            "temperature": pair.sampling.temperature, "source": pair.source, "models": models}


def pair_lines(records: list[dict]) -> list[str]:
    lines = []
    for record in records:
        marker = "*" if record["default"] else " "
        lines.append(f"{marker} {record['name']}  k={record['k']}  {record['description']}")
        for role, model in record["models"].items():
            state = "available offline" if model["available"] else "NOT available"
            lines.append(f"    {role:<6} {model['ref']}: {state} ({model['where']})")
    sources = ", ".join(sorted({record["source"] for record in records}))
    return lines + [f"(* default; from {sources})"]


def drafter(draft: str | None) -> str:
    """What proposes the drafts: a draft model, prompt lookup (ngram), or none."""
    return "none" if not draft else ("ngram" if draft == "ngram" else "model")
