"""The benchmark's prompt set: a JSONL file of {"id", "category", "prompt"} objects, or of
MT-bench / Spec-Bench questions ({"question_id", "category", "turns": [...]}).

A question gives its first turn as one prompt; with `all_turns`, every turn is a prompt
of its own that continues the conversation of the turn before it (`follows`: the answers
in between are the benchmark's own, filled in as it runs). The default set is the one
shipped inside the package (specchat/_data/prompts.jsonl: 36 prompts in the categories
chat, code, extract, creative, math, edit). Every problem with a file is a one-line
`UsageError` naming the file and line. Knows nothing about models or timing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specchat import paths
from specchat.errors import UsageError


@dataclass(frozen=True)
class BenchPrompt:
    """One prompt of the set."""

    id: str
    category: str
    prompt: str
    follows: str | None = None
    """The id of the prompt this one continues (an MT-bench question's earlier turn): its
    conversation, with the answer given to it, comes before this prompt."""


def default_prompts_file() -> Path:
    """The prompt set shipped inside the package."""
    return paths.shipped("prompts.jsonl")


def resolve_prompts_file(given: Path | None) -> Path:
    return given if given is not None else default_prompts_file()


def load_prompts(path: Path, all_turns: bool = False) -> list[BenchPrompt]:
    """Parse and check a prompts file; at least one prompt, ids unique. MT-bench questions
    give their first turn, or every turn with `all_turns`."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"prompts file {path} does not exist: check --prompts") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"prompts file {path} cannot be read ({error}): pass a UTF-8 JSONL file") from None
    prompts = [prompt for number, line in enumerate(lines, 1) if line.strip()
               for prompt in parse_line(path, number, line, all_turns)]
    if not prompts:
        raise UsageError(f"prompts file {path} holds no prompts: add one JSON object per line")
    check_unique(path, prompts)
    return prompts


def parse_line(path: Path, number: int, line: str, all_turns: bool = False) -> list[BenchPrompt]:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not valid JSON ({error.msg}); write one object per line: "
                         '{"id", "category", "prompt"} or MT-bench\'s {"question_id", '
                         '"category", "turns"}') from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object with id, category and prompt "
                         "(or question_id, category and turns)")
    if "turns" in obj:
        turns = question_turns(where, obj)
        return turns if all_turns else turns[:1]
    for key in ("prompt", "category"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            raise UsageError(f"{where}: '{key}' must be a non-empty string")
    return [BenchPrompt(str(obj.get("id", f"line-{number}")), obj["category"], obj["prompt"])]


def question_turns(where: str, obj: dict) -> list[BenchPrompt]:
    """An MT-bench / Spec-Bench question as prompts, one per turn: `ID`, then `ID.2`, `ID.3`
    (each following the one before)."""
    turns = obj["turns"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip()
                                                           for t in turns):
        raise UsageError(f"{where}: 'turns' must be a list of non-empty strings")
    category = obj.get("category") or "mt-bench"
    if not isinstance(category, str):
        raise UsageError(f"{where}: 'category' must be a string")
    base = str(obj.get("question_id", where.rsplit(":", 1)[-1]))
    ids = [base] + [f"{base}.{turn}" for turn in range(2, len(turns) + 1)]
    return [BenchPrompt(ids[i], category, text, ids[i - 1] if i else None)
            for i, text in enumerate(turns)]


def check_unique(path: Path, prompts: list[BenchPrompt]) -> None:
    seen: set[str] = set()
    for prompt in prompts:
        if prompt.id in seen:
            raise UsageError(f"{path}: prompt id '{prompt.id}' appears twice: ids must be unique")
        seen.add(prompt.id)
