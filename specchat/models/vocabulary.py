"""Whether a draft shares its target's vocabulary: a one-line `PairError` where it does not.

Two transformers tokenizers are compared token by token; two GGUF models on llama.cpp by a
digest of the token texts llama.cpp reads from each file (remembered per file in the cache,
models/gguf/cache.py), so a GGUF draft needs no tokenizer of its own. Loads nothing.
"""

from __future__ import annotations

from specchat.errors import PairError
from specchat.models.config.pairs import PairConfig
from specchat.models.gguf import cache as gguf_cache


def check_same_vocabulary(pair: PairConfig, target_tokenizer, draft_tokenizer) -> None:
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        raise vocabulary_mismatch(pair, len(draft_tokenizer), len(target_tokenizer))


def check_same_llamacpp_vocabulary(pair: PairConfig, target, draft) -> None:
    """Two GGUF models share a vocabulary when llama.cpp reads the same token texts from both:
    compared by digest (remembered per file), so no second tokenizer is converted or loaded."""
    digests = [gguf_cache.remembered(model.path, "vocabulary", model.vocabulary_digest)
               for model in (target, draft)]
    if digests[0] != digests[1]:
        raise vocabulary_mismatch(pair, draft.n_vocab, target.n_vocab)


def vocabulary_mismatch(pair: PairConfig, draft_tokens: int, target_tokens: int) -> PairError:
    return PairError(
        f"pair '{pair.name}': draft {pair.draft} and target {pair.target} use different "
        f"vocabularies ({draft_tokens} vs {target_tokens} tokens): "
        "pick a draft from the target's model family")
