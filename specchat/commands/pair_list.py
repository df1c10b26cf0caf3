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
    """One pair's record; a model reference that cannot be read (`hf:justone`) is marked
    with its one-line problem, in the model's record and the pair's, and the rest listed."""
    models = {role: model_record(ref) for role, ref in (("target", pair.target),
                                                       ("draft", pair.draft)) if ref}
    problems = [f"{role} {model['problem']}" for role, model in models.items() if "problem" in model]
    return {"name": name, "default": default, "problem": problems[0] if problems else None,
            "description": pair.description, "k": pair.k,
            "drafter": drafter(pair.draft),
            "backend": pair.backend, "dtype": pair.dtype, "device": pair.device,
            "temperature": pair.sampling.temperature, "source": pair.source, "models": models}


def model_record(ref: str) -> dict:
    """A model's reference, whether it is available offline and where it was looked for;
    or, for a reference that cannot be read, its problem."""
    from specchat.errors import SpecchatError
    from specchat.models.config.refs import availability, parse_ref

    try:
        ok, where = availability(parse_ref(ref))
    except SpecchatError as error:
        return {"ref": ref, "available": False, "where": None, "problem": str(error)}
    return {"ref": ref, "available": ok, "where": where}


def pair_lines(records: list[dict]) -> list[str]:
    lines = []
    for record in records:
        marker = "!" if record.get("problem") else "*" if record["default"] else " "
        lines.append(f"{marker} {record['name']}  k={record['k']}  {record['description']}")
        for role, model in record["models"].items():
            lines.append(f"    {role:<6} {model['ref']}: {model_state(model)}")
    sources = ", ".join(sorted({record["source"] for record in records}))
    flagged = "; ! a reference that cannot be used" if any(r.get("problem") for r in records) else ""
    return lines + [f"(* default{flagged}; from {sources})"]


def model_state(model: dict) -> str:
    if "problem" in model:
        return f"UNUSABLE ({model['problem']})"
    state = "available offline" if model["available"] else "NOT available"
    return f"{state} ({model['where']})"


def drafter(draft: str | None) -> str:
    """What proposes the drafts: a draft model, a draft head over the target's features,
    prompt lookup (ngram), or none."""
    if not draft:
        return "none"
    if draft == "ngram":
        return "ngram"
    from specchat.errors import SpecchatError
    from specchat.models.config.refs import head_file, parse_ref

    try:
        return "head" if head_file(parse_ref(draft)) is not None else "model"
    except SpecchatError:
        return "model"
