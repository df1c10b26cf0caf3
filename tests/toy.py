"""Toy models for engine tests: exact, tiny and transparent.

`TableModel` implements the engine's `CausalModel` protocol with logits that depend
on the last two tokens through fixed random tables, and keeps its "cache" as the
literal list of token ids it has been fed, so tests can check cache contents, not
just lengths. Small vocabularies make exact distributions enumerable.
"""

from __future__ import annotations

import torch


class TableModel:
    """logits(next | ..., a, b) = scale * (T1[b] + T2[a]); the cache is the fed ids."""

    def __init__(self, vocab_size: int = 8, seed: int = 0, scale: float = 2.0):
        generator = torch.Generator().manual_seed(seed)
        self.t1 = torch.randn(vocab_size, vocab_size, generator=generator) * scale
        self.t2 = torch.randn(vocab_size, vocab_size, generator=generator) * scale / 2
        self.vocab_size = vocab_size
        self.device = torch.device("cpu")
        self.fed: list[int] = []
        self.forward_calls: list[int] = []

    @property
    def cache_length(self) -> int:
        return len(self.fed)

    def logits_after(self, history: list[int]) -> torch.Tensor:
        last = history[-1]
        before = history[-2] if len(history) > 1 else 0
        return self.t1[last] + self.t2[before]

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        new = ids.reshape(-1).tolist()
        self.forward_calls.append(len(new))
        rows = []
        for token in new:
            self.fed.append(token)
            rows.append(self.logits_after(self.fed))
        return torch.stack(rows[-keep:])

    def crop(self, length: int) -> None:
        del self.fed[length:]

    def reset(self) -> None:
        self.fed = []

    def copy_tables_from(self, other: "TableModel") -> "TableModel":
        self.t1, self.t2 = other.t1.clone(), other.t2.clone()
        return self


def plain_greedy(model: TableModel, prompt: list[int], n: int, eos: set[int] = frozenset()) -> list[int]:
    """Reference greedy decoding without any cache tricks."""
    history, out = list(prompt), []
    for _ in range(n):
        token = int(model.logits_after(history).argmax())
        history.append(token)
        out.append(token)
        if token in eos:
            break
    return out


class FakeClock:
    """A stand-in for the decoder's `time` module: seconds pass only when a toy model
    says its forward took them, so timings (and k = "auto"'s choices) are exact."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def use_fake_clock(monkeypatch) -> FakeClock:
    """A `FakeClock` for the decoder: its catch-up chunks and its rounds' stopwatch
    (engine/round_clock.py) both read it."""
    from specchat.engine import decoder, round_clock

    fake = FakeClock()
    monkeypatch.setattr(decoder, "time", fake)
    monkeypatch.setattr(round_clock, "time", fake)
    return fake


class TimedTableModel(TableModel):
    """A TableModel whose forward of n tokens takes `base + per_token * n` fake seconds."""

    def __init__(self, clock: FakeClock, base: float, per_token: float, **kwargs):
        super().__init__(**kwargs)
        self.clock, self.base, self.per_token = clock, base, per_token

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.clock.now += self.base + self.per_token * ids.numel()
        return super().forward(ids, keep)


class ScriptedModel(TableModel):
    """A target whose greedy choice after any history is the next token of a fixed script
    (`script[len(history)]`; 0 past its end), timed like `TimedTableModel`: an answer of
    known text, for measuring what drafting it costs."""

    def __init__(self, script: list[int], clock: FakeClock, base: float, per_token: float,
                 vocab_size: int = 64):
        super().__init__(vocab_size=vocab_size)
        self.script, self.clock, self.base, self.per_token = script, clock, base, per_token

    def logits_after(self, history: list[int]) -> torch.Tensor:
        logits = torch.zeros(self.vocab_size)
        position = len(history)
        logits[self.script[position] if position < len(self.script) else 0] = 1.0
        return logits

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.clock.now += self.base + self.per_token * ids.numel()
        return super().forward(ids, keep)


class FeatureTableModel(TableModel):
    """A TableModel that keeps features like a real target (engine `FeatureSource`): after a
    forward, [one-hot of the token, its logits row] for every token it fed, so a head that
    reads the feature at p - 1 learns which token stood there."""

    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        new = ids.reshape(-1).tolist()
        start = len(self.fed)
        rows = super().forward(ids, keep=len(new))
        tokens = torch.nn.functional.one_hot(torch.tensor(self.fed[start:]), self.vocab_size)
        self.features = torch.cat([tokens.float(), rows], dim=1)
        return rows[len(new) - keep:]


class TableHead:
    """A draft head (engine `DraftHead`) over `FeatureTableModel` features: row p reads the
    one-hot of token p - 1 from the feature at p - 1, and guesses [one-hot of token p,
    T1[token p] + T2[token p - 1]]: with the target's tables, exactly the target's feature.
    Its cache is the literal rows it was fed, (feature, token), so tests can read it."""

    def __init__(self, vocab_size: int, t1: torch.Tensor, t2: torch.Tensor):
        self.vocab_size, self.device = vocab_size, torch.device("cpu")
        self.hidden_size = 2 * vocab_size
        self.t1, self.t2 = t1.clone(), t2.clone()
        self.rows: list[tuple[torch.Tensor, int]] = []
        self.forward_calls: list[int] = []

    @classmethod
    def of(cls, target: TableModel, noise: float = 0.0, seed: int = 8) -> "TableHead":
        generator = torch.Generator().manual_seed(seed)
        head = cls(target.vocab_size, target.t1, target.t2)
        head.t1 += noise * torch.randn(head.t1.shape, generator=generator)
        head.t2 += noise * torch.randn(head.t2.shape, generator=generator)
        return head

    @property
    def cache_length(self) -> int:
        return len(self.rows)

    def forward(self, features: torch.Tensor, ids: torch.Tensor, keep: int = 1):
        self.forward_calls.append(int(ids.numel()))
        guesses = []
        for feature, token in zip(features, ids.reshape(-1).tolist()):
            self.rows.append((feature.clone(), token))
            before = int(feature[: self.vocab_size].argmax()) if feature.any() else 0
            logits = self.t1[token] + self.t2[before]
            one_hot = torch.nn.functional.one_hot(torch.tensor(token), self.vocab_size)
            guesses.append(torch.cat([one_hot.float(), logits]))
        guess = torch.stack(guesses[-keep:])
        return guess[:, self.vocab_size:], guess

    def crop(self, length: int) -> None:
        del self.rows[length:]

    def reset(self) -> None:
        self.rows = []
