"""`specchat pairs --suggest TARGET`: which models already on this machine could draft for
TARGET, best bets first.

Every model readable without loading or downloading it is gathered as a card
(models/cards.py): those models.toml names, the built-ins, and the stores users keep models
in (models/config/stores.py: ollama, the Hugging Face cache, LM Studio). Candidates are the
models that write text and are smaller than the target, in three groups: the same tokenizer
(they speculate as one, models/vocabulary.py), the same family, any other tokenizer (their
text is re-tokenized for the target, chat/cross/). Within a group the one nearest a tenth of
the target's size comes first: small enough to be cheap, big enough to agree. Before them
come the draft heads trained for this very target (`specchat distill --head`: the built-in
ones, those models.toml names and those built into the data folder's heads/), read from
their headers (models/head/header.py): a head reads the target's own features. Each row has
the size ratio (the draft's weight bytes over the target's: its step cost c where decoding
reads every weight once) and the draft's memory. `--measure` loads the first few and
measures them (suggest_measure.py); `--write NAME` puts one into the user's models.toml.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from specchat.models.cards import ModelCard

GROUPS = ("target's head", "same tokenizer", "same family", "other tokenizer")
TENTH = 0.1
"""The size ratio a group's order starts from."""


@dataclass
class Candidate:
    """A model that could draft for the target."""

    card: ModelCard
    group: int
    """Index into GROUPS."""
    ratio: float
    """Its weight bytes over the target's."""
    measured: dict | None = None
    """With --measure: α, c, the best k and the projected speedup (suggest_measure.py)."""

    def as_dict(self) -> dict:
        return {"ref": self.card.ref, "group": GROUPS[self.group],
                "size_ratio": round(self.ratio, 4),
                "memory_bytes": self.card.weight_bytes, "card": self.card.as_dict(),
                "measured": self.measured}


@dataclass
class Suggestion:
    """The candidates for one target, and how they were found."""

    target: ModelCard
    candidates: list[Candidate]
    notes: list[str] = field(default_factory=list)
    roots: dict[str, list[str]] = field(default_factory=dict)
    models_found: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"target": self.target.as_dict(), "models_found": self.models_found,
                "candidates": [c.as_dict() for c in self.candidates], "notes": self.notes,
                "looked_in": self.roots, "seconds": round(self.seconds, 3)}


def suggest(target: str, catalog: Any) -> Suggestion:
    """The candidate drafts for `target` (a model reference, or a pair whose target it is)."""
    started = time.perf_counter()
    target_card = target_of(target, catalog)
    cards, notes, roots = gather(catalog)
    found = [card for card in cards if card.path != target_card.path]
    heads = [Candidate(card, 0, card.weight_bytes / max(target_card.weight_bytes, 1))
             for card in head_cards(catalog, target_card, notes)]
    return Suggestion(target_card, heads + ranked(target_card, found), notes, roots,
                      len(found) + len(heads), time.perf_counter() - started)


def target_of(text: str, catalog: Any) -> ModelCard:
    from specchat.errors import ModelNotFound, SpecchatError
    from specchat.models.cards import card_for_ref

    ref = catalog.pairs[text].target if text in catalog.pairs else text
    try:
        return card_for_ref(ref, "given")
    except ModelNotFound:
        raise
    except SpecchatError as error:
        raise ModelNotFound(f"--suggest {text}: {error}") from None


SOURCES = ("catalog", "builtin", "ollama", "hf-cache", "lm-studio")
"""Where a model is named from, first wins where two name one file."""


def gather(catalog: Any) -> tuple[list[ModelCard], list[str], dict[str, list[str]]]:
    """Every model card here (one per file), the notes of what could not be read, and the
    folders the stores were looked for in."""
    from specchat.models.config import stores

    notes: list[str] = []
    cards = known_cards(catalog, notes)
    scan = stores.scan()
    notes += scan.notes
    cards += [card for card in map(lambda f: store_card(f, notes), scan.found) if card]
    unique: dict[str, ModelCard] = {}
    for card in cards:
        unique.setdefault(card.path, card)
    return list(unique.values()), notes, scan.roots


def known_cards(catalog: Any, notes: list[str]) -> list[ModelCard]:
    """The catalog's models and the built-ins that are on this machine as files (a built-in
    not installed or not joined from its parts yet is no note: `specchat pairs` says where
    each stands). Draft heads are left out here: each drafts only for the target it read,
    so `head_cards` gathers those of the target asked about."""
    from specchat.errors import SpecchatError
    from specchat.models.adapters import is_head_ref
    from specchat.models.cards import card_for_ref
    from specchat.models.config.refs import known_builtins

    cards = []
    named = [(ref, "catalog") for pair in catalog.pairs.values()
             for ref in (pair.target, pair.draft) if ref and ref != "ngram"]
    named += [(ref, "builtin") for ref in known_builtins().split(", ")
              if not ref.endswith(".gguf")]
    for ref, source in dict.fromkeys((ref, s) for ref, s in named if not is_head_ref(ref)):
        try:
            cards.append(card_for_ref(ref, source))
        except SpecchatError as error:
            if not ref.startswith("builtin:"):  # `specchat pairs` says where built-ins stand
                notes.append(f"{ref} (models.toml): {first_line(error)}")
    return cards


def head_cards(catalog: Any, target: ModelCard, notes: list[str]) -> list[ModelCard]:
    """The draft heads here that were trained for `target`: the built-in ones, those the
    catalog's pairs name, and those in the data folder's heads/ (one card per file; a file
    that is no readable head is a note)."""
    from specchat import paths
    from specchat.errors import SpecchatError
    from specchat.models.adapters import is_head_ref
    from specchat.models.cards import head_card
    from specchat.models.config.refs import HEAD_FILE, head_file, known_builtins, parse_ref

    named = [(ref, "builtin") for ref in known_builtins().split(", ") if is_head_ref(ref)]
    named += [(pair.draft, "catalog") for pair in catalog.pairs.values() if is_head_ref(pair.draft)]
    named += [(str(found.parent), "data") for found in sorted(
        (paths.data_dir() / "heads").glob(f"*/{HEAD_FILE}"))]
    cards: dict[str, ModelCard] = {}
    for ref, source in named:
        path = head_file(parse_ref(ref))
        if path is None or not path.is_file():
            continue
        key = str(path.resolve())
        if key in cards:
            continue
        try:
            card = head_card(ref, path, source, target)
        except SpecchatError as error:
            notes.append(f"{first_line(error)}: skipped")
            continue
        if card is not None:
            cards[key] = card
    return list(cards.values())


def store_card(found: Any, notes: list[str]) -> ModelCard | None:
    from specchat.errors import SpecchatError
    from specchat.models.cards import folder_card, gguf_card

    try:
        if found.path.is_dir():
            return folder_card(found.path, found.ref, found.source)
        return gguf_card(found.path, found.ref, found.source)
    except (SpecchatError, OSError) as error:
        notes.append(f"{found.ref}: {first_line(error)}: skipped")
        return None


def ranked(target: ModelCard, cards: list[ModelCard]) -> list[Candidate]:
    """The cards that could draft for `target`, in the order of the module docstring."""
    candidates = [Candidate(card, group_of(target, card), card.weight_bytes / target.weight_bytes)
                  for card in cards if card.generates and card.weight_bytes > 0
                  and target.weight_bytes > 0 and card.weight_bytes < target.weight_bytes]
    return sorted(candidates, key=lambda c: (c.group, abs(math.log10(c.ratio / TENTH)),
                                             c.card.ref))


def group_of(target: ModelCard, card: ModelCard) -> int:
    if target.tokenizer and card.tokenizer == target.tokenizer:
        return 1
    return 2 if target.family and card.family == target.family else 3


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


# --- what a person reads ----------------------------------------------------------------

def suggestion_lines(result: Suggestion, target_text: str, pair_name: str) -> list[str]:
    from specchat.bench.format import table
    from specchat.sizes import size_text

    target = result.target
    lines = [f"drafts for {target.ref} ({target.architecture} {target.size_label or ''}"
             f" {size_text(target.weight_bytes)}), from {result.models_found} other models "
             f"found in {result.seconds:.1f} s (catalog, built-ins, ollama, HF cache, LM Studio):"]
    if not result.candidates:
        return lines + ["  none: no model here is smaller than the target and writes text"] + \
            [f"  note: {note}" for note in result.notes]
    measured = any(c.measured for c in result.candidates)
    rows = [["draft", "tokenizer", "size", "ratio", "memory", "from"]
            + (["α", "c", "k", "speedup"] if measured else [])]
    rows += [candidate_row(i, c, measured) for i, c in enumerate(result.candidates, start=1)]
    lines += ["  " + line for line in table(rows).splitlines()]
    lines += [f"note: {note}" for note in result.notes]
    lines += [f"speedup n/a for {c.card.ref}: {c.measured['timing_problem']}"
              for c in result.candidates if c.measured and c.measured.get("timing_problem")]
    lines.append("ratio: the draft's weight bytes over the target's (its step cost c where a "
                 "step reads every weight); memory: the draft's weights")
    return lines + [write_line(target_text, pair_name)]


def candidate_row(index: int, candidate: Candidate, measured: bool) -> list[str]:
    from specchat.sizes import size_text

    card = candidate.card
    row = [f"{index}. {card.ref}", GROUPS[candidate.group], card.size_label,
           f"{candidate.ratio:.3f}", size_text(card.weight_bytes), card.source]
    if measured:
        row += measured_cells(candidate.measured)
    return row


def measured_cells(measured: dict | None) -> list[str]:
    if not measured:
        return ["", "", "", ""]
    if "problem" in measured:
        return ["", "", "", measured["problem"][:30]]
    speedup = measured.get("projected_speedup")
    return [f"{measured['alpha']:.2f}", f"{measured['c']:.2f}", str(measured["best_k"]),
            "n/a" if speedup is None else f"{speedup:.2f}x"]


def write_line(target_text: str, pair_name: str) -> str:
    return (f"to keep one: specchat pairs --suggest {quoted(target_text)} --write {pair_name} "
            "[--pick N] (N: its row; the first by default)")


def quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def pair_name_for(target: ModelCard, draft: ModelCard | None) -> str:
    """A pair name from the two models' names: "qwen2.5-coder-with-smollm2" (a draft of the
    target's own name by its size: "qwen2.5-coder-with-0.5b"; a head: "qwen2.5-coder-with-head")."""
    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "model"

    if draft is None:
        return slug(target.name) + "-with-draft"
    if draft.kind == "head":
        return slug(target.name) + "-with-head"
    same = slug(draft.name) == slug(target.name)
    what = slug(draft.size_label or "draft") if same else slug(draft.name)
    return f"{slug(target.name)}-with-{what}"



def write_pair(result: Suggestion, name: str, pick: int = 1):
    """Append candidate `pick` (1: the first row) as pair `name` to the user's models.toml;
    the file written. `UsageError` for a row that is not there or a name already taken."""
    import json

    from specchat import paths
    from specchat.errors import UsageError
    from specchat.models.config.pairs import read_toml

    if not 1 <= pick <= len(result.candidates):
        raise UsageError(f"--pick {pick}: the list has {len(result.candidates)} candidates")
    candidate, file = result.candidates[pick - 1], paths.user_models_file()
    if file.is_file() and name in (read_toml(file).get("pairs") or {}):
        raise UsageError(f"pair '{name}' is already in {file}: choose another --write NAME")
    why = f"{GROUPS[candidate.group]}, {candidate.ratio:.2f} of the target's size"
    lines = [f"[pairs.{json.dumps(name)}]",
             f"description = {json.dumps(f'found by specchat pairs --suggest: {why}')}",
             f"target = {json.dumps(result.target.ref)}",
             f"draft = {json.dumps(candidate.card.ref)}",
             'k = "auto"']
    if candidate.card.kind == "head":  # as the shipped head pair: lookup first, the head after
        lines.append("lookup = true")
    file.parent.mkdir(parents=True, exist_ok=True)
    before = file.read_text(encoding="utf-8") if file.is_file() else ""
    gap = "" if not before else "\n" if before.endswith("\n") else "\n\n"
    file.write_text(before + gap + "\n".join(lines) + "\n", encoding="utf-8")
    return file
