"""A draft head's training data: the target's own answers with its features at every position.

The target answers the prompt set, rendered with its chat template, several answers at a
time. On a CPU it is an `Int8Model` (models/int8/batched.py; each new prompt joins the batch
as another's answer ends, so it stays full); on a GPU a transformers model answering in
waves (`WaveModel`, models/torch_backend/feature_wave.py: the prompts of a wave left-padded
together, every answer of the wave one token a step, a wave ending with its longest
answer). Every forward already computes the final hidden states the head learns to predict, so they are kept, in float16, for every token fed: the prompt's and
the answer's (all but the last token, which is never fed). Each group of `SHARD_PROMPTS`
prompts becomes one shard file, written as soon as its last answer ends; shards are
numbered in a fixed, seeded order (teacher.batch_plan) and each answer samples with its own
seed, so an interrupted run resumes by skipping the shards it has, never computes a feature
twice, and gets the answers an uninterrupted run would have. The first pass over the
prompts is greedy (what greedy speculative decoding sees); later passes sample at
`SAMPLED_TEMPERATURE`. Knows nothing about the head or training.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

import torch

from specchat.distill import teacher
from specchat.distill.teacher import (SAMPLED_TEMPERATURE, AnswerSample, answer_tokens,
                                      batch_plan, pad_left, render_chat, save_shard)

REPORT_EVERY = 64
"""Answer tokens between two progress reports while a shard runs."""
SHARD_PROMPTS = 16
"""Prompts per shard: at most what an interruption costs (answers of the next shards run
beside a shard's last ones, so the batch stays full)."""


@dataclass
class FeatureSample(AnswerSample):
    """An answer for a head (ids int32): the target's features at every fed position."""

    features: torch.Tensor
    """[n - 1, hidden] float16: the target's final hidden state after each token but the last."""


@dataclass(frozen=True)
class Job:
    """One answer to generate: the prompt at `position` of shard `shard`."""

    shard: int
    position: int
    prompt: tuple[int, ...]
    temperature: float
    seed: int
    """Its own sampling seed: an answer never depends on which others ran beside it."""


@dataclass
class Stream:
    """An answer being generated in one slot of the batch."""

    job: Job
    ids: list[int]
    generator: torch.Generator
    features: list[torch.Tensor] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    """Tokens to feed next (the prompt, then the last token chosen)."""

    @classmethod
    def of(cls, job: Job) -> "Stream":
        generator = torch.Generator().manual_seed(job.seed)
        return cls(job, list(job.prompt), generator, pending=list(job.prompt))

    def sample(self) -> FeatureSample:
        return FeatureSample(torch.tensor(self.ids, dtype=torch.int32), len(self.job.prompt),
                             torch.cat(self.features).to(torch.float16))


def choose(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def answers(batch, jobs: list[Job], eos_ids: set[int], max_new_tokens: int,
            on_token: Callable[[], None] = lambda: None) -> Iterator[tuple[Job, FeatureSample]]:
    """Each job's answer as it ends, decoded on `batch` (an `Int8Batch`): a slot whose answer
    ended takes the next job at once, so the batch stays full."""
    waiting, streams = list(jobs), dict[int, Stream]()
    while waiting or streams:
        for slot in range(len(batch.lengths)):
            if slot not in streams and waiting:
                batch.reset(slot)
                streams[slot] = Stream.of(waiting.pop(0))
        feeds = {slot: torch.tensor(stream.pending) for slot, stream in streams.items()}
        logits, features = batch.forward(feeds)
        for row, (slot, ids) in enumerate(feeds.items()):
            stream = streams[slot]
            stream.features.append(features[:len(ids)])
            features = features[len(ids):]
            token = choose(logits[row], stream.job.temperature, stream.generator)
            stream.ids.append(token)
            stream.pending = [token]
            on_token()
            if token in eos_ids or len(stream.ids) - len(stream.job.prompt) >= max_new_tokens:
                del streams[slot]
                yield stream.job, stream.sample()


Answered = Iterator[tuple[Job, FeatureSample]]
AnswerSource = Callable[[list[Job], Callable[[], None]], Answered]
"""Answers jobs (calling back after each token chosen), yielding each as it ends."""


def slot_answers(batch, eos_ids: set[int], max_new_tokens: int) -> AnswerSource:
    """`answers` on an `Int8Batch`."""
    return lambda jobs, on_token: answers(batch, jobs, eos_ids, max_new_tokens, on_token)


class WaveModel(Protocol):
    """A target answering a batch of sequences in lockstep, keeping its final hidden states."""

    def start(self) -> None:
        """Forget the last wave (its cache)."""
        ...

    def forward(self, ids: torch.Tensor, mask: torch.Tensor,
                positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ids [batch, n] at `positions` [batch, n], `mask` [batch, all so far] saying
        which positions hold tokens (left padding does not); (the last row's logits [batch,
        vocab] and the features of every row fed [batch, n, hidden]), both on the CPU."""
        ...


def wave_answers(model: WaveModel, eos_ids: set[int], max_new_tokens: int,
                 size: int) -> AnswerSource:
    """Jobs answered `size` at a time in waves on `model`."""
    def answer(jobs: list[Job], on_token: Callable[[], None]) -> Answered:
        for start in range(0, len(jobs), size):
            yield from one_wave(model, jobs[start:start + size], eos_ids, max_new_tokens,
                                on_token)
    return answer


def one_wave(model: WaveModel, jobs: list[Job], eos_ids: set[int], max_new_tokens: int,
             on_token: Callable[[], None]) -> Answered:
    """One wave: the prompts left-padded into one forward, then every unfinished answer one
    token a step (a finished one is fed padding, masked out, until the wave ends). Each
    answer samples with its own generator, as `answers` does, and keeps a feature for every
    token fed: its prompt's and its answer's but the last."""
    streams = [Stream.of(job) for job in jobs]
    pad = min(eos_ids, default=0)
    ids, mask = pad_left([list(job.prompt) for job in jobs], pad)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    model.start()
    logits, features = model.forward(ids, mask, positions)
    for row, stream in enumerate(streams):
        stream.features.append(features[row, ids.shape[1] - len(stream.job.prompt):])
    live = list(range(len(streams)))
    while True:
        live, ended = chosen(streams, live, logits, eos_ids, max_new_tokens, on_token)
        yield from ((stream.job, stream.sample()) for stream in ended)
        if not live:
            return
        going = set(live)
        fed = torch.tensor([[s.ids[-1] if row in going else pad] for row, s in enumerate(streams)])
        mask = torch.cat([mask, torch.tensor([[int(row in going)] for row in range(len(streams))])],
                         dim=1)
        positions = positions[:, -1:] + 1
        logits, features = model.forward(fed, mask, positions)
        for row in live:
            streams[row].features.append(features[row])


def chosen(streams: list[Stream], live: list[int], logits: torch.Tensor, eos_ids: set[int],
           max_new_tokens: int, on_token: Callable[[], None]) -> tuple[list[int], list[Stream]]:
    """Each live answer's next token, from its row of `logits`; (the rows still going, the
    answers that ended: an end-of-sequence token or `max_new_tokens`)."""
    going, ended = [], []
    for row in live:
        stream = streams[row]
        stream.ids.append(choose(logits[row], stream.job.temperature, stream.generator))
        on_token()
        if (stream.ids[-1] in eos_ids
                or len(stream.ids) - len(stream.job.prompt) >= max_new_tokens):
            ended.append(stream)
        else:
            going.append(row)
    return going, ended


FEATURE_STEM = "features"
"""Feature shards are `features-NNNN.pt`, written and read by teacher.py's shard functions."""


def shard_path(folder: Path, index: int) -> Path:
    return teacher.shard_path(folder, index, FEATURE_STEM)


def load_shards(folder: Path) -> list[FeatureSample]:
    return teacher.load_shards(folder, FeatureSample, FEATURE_STEM)


def planned_jobs(tokenizer, prompts: list[str], folder: Path, tokens: int, max_new_tokens: int,
                 seed: int) -> list[Job]:
    """The answers of every shard not on disk yet, in the plan's fixed, seeded order."""
    passes = max(1, -(-tokens // max(1, len(prompts) * max_new_tokens // 2)))
    jobs = []
    for index, (number, group) in enumerate(batch_plan(prompts, SHARD_PROMPTS, passes + 4, seed)):
        if shard_path(folder, index).exists():
            continue
        temperature = 0.0 if number == 0 else SAMPLED_TEMPERATURE
        jobs += [Job(index, position, tuple(render_chat(tokenizer, prompt)), temperature,
                     seed * 1_000_003 + index * SHARD_PROMPTS + position)
                 for position, prompt in enumerate(group)]
    return jobs


def generate_shards(answer: AnswerSource, tokenizer, prompts: list[str], folder: Path,
                    tokens: int, max_new_tokens: int, seed: int,
                    report: Callable[[int, int], None] = lambda done, total: None) -> None:
    """Fill `folder` with shards until they hold at least `tokens` answer tokens, the answers
    `answer`'s (`slot_answers` or `wave_answers`); each shard is written as soon as its last
    answer ends (answers of later shards already run)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = answer_tokens(load_shards(folder))
    report(done, tokens)  # the starting point, so a rate counts only new tokens
    if done >= tokens:
        return
    jobs = planned_jobs(tokenizer, prompts, folder, tokens, max_new_tokens, seed)
    sizes = Counter(job.shard for job in jobs)
    finished: dict[int, dict[int, FeatureSample]] = defaultdict(dict)
    generated = [done]

    def on_token() -> None:
        generated[0] += 1
        if generated[0] % REPORT_EVERY == 0:
            report(shown_progress(done, generated[0], tokens), tokens)

    for job, sample in answer(jobs, on_token):
        finished[job.shard][job.position] = sample
        if len(finished[job.shard]) < sizes[job.shard]:
            continue
        shard = finished.pop(job.shard)
        save_shard(shard_path(folder, job.shard), [shard[i] for i in sorted(shard)])
        done += answer_tokens(list(shard.values()))
        report(shown_progress(done, generated[0], tokens), tokens)
        if done >= tokens:
            return


def shown_progress(saved: int, generated: int, tokens: int) -> int:
    """The answer tokens a progress report counts: those generated (answers of shards not
    written yet among them), held below `tokens` until the written shards reach it. It never
    runs backwards, and never says the target is reached while answers still run (the last
    shards' answers overshoot it, and answers of shards past it are dropped)."""
    return saved if saved >= tokens else min(generated, tokens - 1)
