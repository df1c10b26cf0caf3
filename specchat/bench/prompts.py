"""The benchmark's prompt set: a JSONL file of {"id", "category", "prompt"} objects.

The default is the set shipped inside the package (specchat/_data/prompts.jsonl: 30
prompts in the categories chat, code, extract, creative, math).
Every problem with a file is a one-line `UsageError` naming the file and line.
Knows nothing about models or timing.
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


def default_prompts_file() -> Path:
    """The prompt set shipped inside the package."""
    return paths.shipped("prompts.jsonl")


def resolve_prompts_file(given: Path | None) -> Path:
    return given if given is not None else default_prompts_file()


def load_prompts(path: Path) -> list[BenchPrompt]:
    """Parse and check a prompts file; at least one prompt, ids unique."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"prompts file {path} does not exist: check --prompts") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"prompts file {path} cannot be read ({error}): pass a UTF-8 JSONL file") from None
    prompts = [parse_line(path, number, line) for number, line in enumerate(lines, 1)
               if line.strip()]
    if not prompts:
        raise UsageError(f"prompts file {path} holds no prompts: add one JSON object per line")
    check_unique(path, prompts)
    return prompts


def parse_line(path: Path, number: int, line: str) -> BenchPrompt:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not valid JSON ({error.msg}); "
                         "write one {\"id\", \"category\", \"prompt\"} object per line") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object with id, category and prompt")
    for key in ("prompt", "category"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            raise UsageError(f"{where}: '{key}' must be a non-empty string")
    return BenchPrompt(str(obj.get("id", f"line-{number}")), obj["category"], obj["prompt"])


def check_unique(path: Path, prompts: list[BenchPrompt]) -> None:
    seen: set[str] = set()
    for prompt in prompts:
        if prompt.id in seen:
            raise UsageError(f"{path}: prompt id '{prompt.id}' appears twice: ids must be unique")
        seen.add(prompt.id)
