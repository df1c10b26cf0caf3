"""Self-distillation data: text the target itself generates, with its top-k logits.

The target answers a prompt set (rendered with its own chat template) in
batches, since batched generation costs far less per token on a CPU than one
stream. Each batch becomes one shard file holding, per answer, the prompt and
answer ids and the target's raw top-k logits at every answer position, so
training never has to run the target again. Shards are numbered in a fixed,
seeded order, so an interrupted run resumes by skipping the shards it has.
The first pass over the prompts is greedy (what speculative greedy decoding
will see); later passes sample at `SAMPLED_TEMPERATURE` for variety.
Knows nothing about the draft or about training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import torch

from specchat.errors import UsageError

TOP_K = 32
SAMPLED_TEMPERATURE = 0.8


@dataclass
class AnswerSample:
    """One answer of the target: ids = prompt + answer; what was kept of it is the subclass's."""

    ids: torch.Tensor
    """Prompt and answer ids, [n]."""
    prompt_len: int

    @property
    def answer_len(self) -> int:
        return int(self.ids.shape[0]) - self.prompt_len


@dataclass
class Sample(AnswerSample):
    """A teacher answer (ids long): the target's top-k per answer token."""

    topk_ids: torch.Tensor
    """[answer_len, TOP_K] token ids; row j is the target's view of answer token j."""
    topk_logits: torch.Tensor
    """[answer_len, TOP_K] raw target logits (float16)."""


def read_prompts(path: Path) -> list[str]:
    """Prompts from a .jsonl file (a "prompt" field per line) or a text file (one per line)."""
    try:
        lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    except OSError as error:
        raise UsageError(f"cannot read prompts file {path}: {error.strerror}") from None
    if Path(path).suffix == ".jsonl":
        try:
            prompts = [json.loads(line)["prompt"] for line in lines]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"prompts file {path}: every line must be a JSON object "
                             "with a \"prompt\" field") from None
    else:
        prompts = lines
    if not prompts:
        raise UsageError(f"prompts file {path} holds no prompts")
    return prompts


def render_chat(tokenizer, prompt: str) -> list[int]:
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             add_generation_prompt=True, tokenize=False)
    else:
        text = f"User: {prompt}\nAssistant:"
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def batch_plan(prompts: list[str], batch_size: int, passes: int, seed: int) -> list[tuple[int, list[str]]]:
    """(pass number, prompts) per batch, in a seeded order that resuming reproduces."""
    plan = []
    for number in range(passes):
        order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(seed + number))
        shuffled = [prompts[i] for i in order.tolist()]
        plan += [(number, shuffled[i:i + batch_size]) for i in range(0, len(shuffled), batch_size)]
    return plan


def pad_left(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row)
        mask[i, width - len(row):] = 1
    return ids, mask


@torch.inference_mode()
def generate_batch(model, rows: list[list[int]], eos_ids: set[int], max_new_tokens: int,
                   temperature: float, seed: int) -> list[Sample]:
    """The target's answers to prompt id rows, with its top-k logits per answer token."""
    pad_id = min(eos_ids)
    ids, mask = pad_left(rows, pad_id)
    device = next(model.parameters()).device
    torch.manual_seed(seed)
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} \
        if temperature > 0 else {"do_sample": False}
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                         max_new_tokens=max_new_tokens, eos_token_id=sorted(eos_ids),
                         pad_token_id=pad_id, output_logits=True, return_dict_in_generate=True,
                         **sampling)
    tops = [step.float().topk(TOP_K, dim=-1) for step in out.logits]  # per step: [batch, K]
    top_logits = torch.stack([t.values for t in tops], dim=1)
    top_ids = torch.stack([t.indices for t in tops], dim=1)
    answers = out.sequences[:, ids.shape[1]:].cpu()
    return [make_sample(row, answers[i], top_ids[i].cpu(), top_logits[i].cpu(), eos_ids)
            for i, row in enumerate(rows)]


def make_sample(prompt: list[int], answer: torch.Tensor, top_ids, top_logits, eos_ids) -> Sample:
    """Cut the answer after its first end-of-sequence token."""
    length = int(answer.shape[0])
    for j, token in enumerate(answer.tolist()):
        if token in eos_ids:
            length = j + 1
            break
    ids = torch.cat([torch.tensor(prompt, dtype=torch.long), answer[:length]])
    return Sample(ids, len(prompt), top_ids[:length].to(torch.int32),
                  top_logits[:length].to(torch.float16))


SHARD_STEM = "shard"
"""Teacher shards are `shard-NNNN.pt`; a head's feature shards use their own stem."""

S = TypeVar("S", bound=AnswerSample)


def shard_path(folder: Path, index: int, stem: str = SHARD_STEM) -> Path:
    return folder / f"{stem}-{index:04d}.pt"


def save_shard(path: Path, samples: Sequence[AnswerSample]) -> None:
    """Write the samples' fields, atomically (a staging file renamed into place)."""
    staging = path.with_suffix(".tmp")
    torch.save([s.__dict__ for s in samples], staging)
    staging.replace(path)


def load_shards(folder: Path, kind: type[S], stem: str = SHARD_STEM) -> list[S]:
    """Every `stem-*.pt` shard in `folder`, in order, as `kind` samples."""
    samples: list[S] = []
    for path in sorted(Path(folder).glob(f"{stem}-*.pt")):
        samples += [kind(**row) for row in torch.load(path)]
    return samples


def answer_tokens(samples: Sequence[AnswerSample]) -> int:
    return sum(s.answer_len for s in samples)


def generate_shards(model, tokenizer, eos_ids: set[int], prompts: list[str], folder: Path,
                    tokens: int, batch_size: int, max_new_tokens: int, seed: int,
                    report: Callable[[int, int], None] = lambda done, total: None) -> None:
    """Fill `folder` with shards until they hold at least `tokens` answer tokens."""
    folder.mkdir(parents=True, exist_ok=True)
    done = answer_tokens(load_shards(folder, Sample))
    report(done, tokens)  # the starting point, so a rate counts only new tokens
    passes = max(1, -(-tokens // max(1, len(prompts) * max_new_tokens // 2)))
    for index, (number, batch) in enumerate(batch_plan(prompts, batch_size, passes + 4, seed)):
        if done >= tokens:
            break
        path = shard_path(folder, index)
        if path.exists():
            continue
        temperature = 0.0 if number == 0 else SAMPLED_TEMPERATURE
        rows = [render_chat(tokenizer, p) for p in batch]
        samples = generate_batch(model, rows, eos_ids, max_new_tokens, temperature, seed + index)
        save_shard(path, samples)
        done += answer_tokens(samples)
        report(done, tokens)
