"""Worlds of two tokenizers for the cross-tokenizer tests, built in the test (no hub):

- `build_metaspace_tokenizer`: a real SentencePiece-style BPE (`▁` for spaces, a space put
  before every text, `<0xNN>` byte-fallback tokens for characters outside its small
  alphabet, `<s>`/`</s>` and no ChatML tokens): deliberately unlike tests/tiny.py's
  byte-level BPE, which the targets use;
- `ToyTokenizer`: a transparent tokenizer over a list of pieces (greedy longest match),
  for alignment cases whose tokens are chosen by hand;
- `ScriptModel`: a model whose greedy next token continues a fixed text in its own
  tokenizer's tokens, so a draft and a target of different tokenizers agree where their
  scripts do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from tiny import CORPUS
from toy import TableModel

METASPACE_SPECIALS = ["<unk>", "<s>", "</s>"]


def build_metaspace_tokenizer(vocab_size: int = 300, alphabet: int = 40):
    """A SentencePiece-style BPE tokenizer with byte fallback (module docstring)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=METASPACE_SPECIALS,
                                  limit_alphabet=alphabet)
    core.train_from_iterator(CORPUS * 4, trainer)
    data = json.loads(core.to_str())
    vocab = data["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    data["model"]["byte_fallback"] = True
    core = Tokenizer.from_str(json.dumps(data))
    core.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                      decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<unk>")


@dataclass(frozen=True)
class Added:
    content: str
    special: bool = True


class FakeDecoder:
    def __getstate__(self) -> bytes:
        return b'{"type":"ByteFallback"}'


class FakeBackend:
    decoder = FakeDecoder()


class ToyTokenizer:
    """Pieces chosen by hand (bytes), spelled SentencePiece-style (`▁`, `<0xNN>`); encodes by
    greedy longest match, special tokens only where `specials` names them."""

    backend_tokenizer = FakeBackend()

    def __init__(self, pieces: list[bytes], specials: dict[int, str] = {}, eos: int | None = None):
        self.pieces, self.eos_token_id = list(pieces), eos
        self.specials = dict(specials)
        self.added_tokens_decoder = {i: Added(text) for i, text in self.specials.items()}

    def __len__(self) -> int:
        return len(self.pieces)

    def name(self, i: int) -> str:
        if i in self.specials:
            return self.specials[i]
        piece = self.pieces[i]
        try:
            return piece.decode("utf-8").replace(" ", "\u2581")
        except UnicodeDecodeError:
            return "".join(f"<0x{b:02X}>" for b in piece)

    def convert_ids_to_tokens(self, ids):
        return [self.name(i) for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return {self.name(i): i for i in range(len(self.pieces))}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        data, ids = text.encode(), []
        specials = {content.encode(): i for i, content in self.specials.items()}
        table = {piece: i for i, piece in enumerate(self.pieces) if i not in self.specials}
        while data:
            special = next((s for s in specials if data.startswith(s)), None)
            if special is not None:
                ids.append(specials[special])
                data = data[len(special):]
                continue
            sizes = [n for n in range(1, len(data) + 1) if data[:n] in table]
            if not sizes:  # a byte no piece spells: left out, as an unknown
                data = data[1:]
                continue
            ids.append(table[data[:max(sizes)]])
            data = data[max(sizes):]
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        data = b"".join(self.pieces[i] for i in ids
                        if not (skip_special_tokens and i in self.specials))
        return data.decode("utf-8", "replace")


def toy_pair(target_pieces: list[bytes], draft_pieces: list[bytes], target_specials=None,
             draft_specials=None, target_eos=None, draft_eos=None):
    """(target tokenizer, draft tokenizer) over pieces given as bytes; every single byte the
    pieces use is a piece of each too (so any text can be spelled in both)."""
    def complete(pieces: list[bytes]) -> list[bytes]:
        singles = sorted({bytes([b]) for piece in target_pieces + draft_pieces for b in piece})
        return list(pieces) + [s for s in singles if s not in pieces]

    return (ToyTokenizer(complete(target_pieces), target_specials or {}, target_eos),
            ToyTokenizer(complete(draft_pieces), draft_specials or {}, draft_eos))


class ScriptModel(TableModel):
    """Greedy next token: the one that continues `script` after the text its history spells
    (past `prompt`), in `tokenizer`'s tokens; `eos` once the script is done or left."""

    def __init__(self, tokenizer, prompt: bytes, script: bytes, eos: int,
                 detour: tuple[bytes, bytes] | None = None):
        super().__init__(vocab_size=len(tokenizer), seed=0)
        self.tokenizer, self.prompt, self.script, self.eos = tokenizer, prompt, script, eos
        self.detour = detour
        """(after this text, write this piece instead): a draft's one mistake."""

    def logits_after(self, history: list[int]) -> torch.Tensor:
        logits = torch.zeros(self.vocab_size)
        logits[self.next_token(history)] = 5.0
        return logits

    def next_token(self, history: list[int]) -> int:
        text = b"".join(self.tokenizer.pieces[i] for i in history)
        if not text.startswith(self.prompt):
            return self.eos
        written = text[len(self.prompt):]
        if self.detour and written == self.detour[0]:
            return self.tokenizer.pieces.index(self.detour[1])
        if not self.script.startswith(written) or written == self.script:
            return self.eos
        rest = self.script[len(written):]
        for size in range(len(rest), 0, -1):  # the longest piece that starts the rest
            for i, piece in enumerate(self.tokenizer.pieces):
                if piece == rest[:size] and i not in self.tokenizer.specials:
                    return i
        return self.eos
