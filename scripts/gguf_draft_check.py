"""Check a draft's GGUF form against the torch draft on real text.

    .venv/bin/python scripts/gguf_draft_check.py [--draft DIR] [--positions 200] [--prompts FILE]
        [--type q8_0 ...]

For each encoding: writes the GGUF file (draft_gguf.export_draft), loads it in
llama.cpp (llama-cpp-python), evaluates the same token ids as the torch draft
(the assembled float32 model) and prints: the vocabulary size of the file and of
the target, how many greedy proposals (argmax of the logits, per position) agree,
whether llama.cpp's argmax is always inside the reduced vocabulary, the smallest
gap between the best reduced logit and the best outside one, and, for the
outside rows' guarantee, the smallest (max_V - mean_V) logit gap against the
largest rounding bound |h|_1 * max|stored mean row - exact mean row|.
The text is the prompt set's prompts, one after another.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from specchat.models.weights import assembled_draft as ensure_assembled
from specchat.models.torch_backend.shipped_draft import DraftSpec
from specchat.models.gguf.export import outside_row_error
from specchat.models.gguf.drafts import export_draft, target_file
from specchat.models.config.refs import builtin_draft



def real_ids(tokenizer, positions: int, prompts: Path | None) -> list[int]:
    from specchat.bench.prompts import load_prompts, resolve_prompts_file

    texts = [prompt.prompt for prompt in load_prompts(resolve_prompts_file(prompts))]
    return tokenizer.encode("\n\n".join(texts))[:positions]


def torch_side(folder: Path, ids: list[int]):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ensure_assembled(folder), dtype=torch.float32)
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return out.logits[0], out.hidden_states[-1][0]


def llama_side(path: Path, ids: list[int]) -> torch.Tensor:
    from specchat.models.llamacpp.baselines import open_llama

    # open_llama, not llama_cpp.Llama: it turns weight repacking off where it crashes (AMX)
    llm = open_llama(path, threads=2, n_ctx=max(512, len(ids) + 8), logits_all=True)
    llm.eval(ids)
    return torch.tensor(np.array(llm.scores[: len(ids)])), llm.n_vocab()


def check(folder: Path, gguf_type: str, ids, logits, hidden, out_dir: Path) -> None:
    spec = DraftSpec.load(folder)
    path = export_draft(folder, out_dir / f"draft-{gguf_type}.gguf", gguf_type=gguf_type).path
    scores, n_vocab = llama_side(path, ids)
    import gguf

    target_vocab = gguf.GGUFReader(target_file(spec, folder)).get_tensor(0).shape[1]
    vocab = torch.tensor(spec.vocab) if spec.vocab else torch.arange(scores.shape[1])
    mine = vocab[logits[:, vocab].argmax(-1)]
    theirs = scores.argmax(-1)
    print(f"{gguf_type}: {path.stat().st_size / 1e6:.1f} MB; vocabulary {n_vocab} "
          f"(target {target_vocab}); greedy proposals equal at {(mine == theirs).sum().item()}"
          f"/{len(ids)} positions; llama.cpp argmax inside the reduced vocabulary: "
          f"{torch.isin(theirs, vocab).all().item()}")
    differ = (mine != theirs).nonzero().flatten()
    if len(differ):
        top2 = logits[differ][:, vocab].topk(2).values
        print(f"    where they differ, the torch draft's top-two margin is at most "
              f"{(top2[:, 0] - top2[:, 1]).max().item():.3f} (a near-tie)")
    if spec.vocab:
        outside_stats(path, vocab, logits, hidden, scores)


def outside_stats(path: Path, vocab, logits, hidden, scores) -> None:
    outside = torch.ones(scores.shape[1], dtype=torch.bool)
    outside[vocab] = False
    gap = scores[:, vocab].max(-1).values - scores[:, outside].max(-1).values
    _, error = outside_row_error(path)
    bound = hidden.abs().sum(-1) * error
    spread = logits[:, vocab].max(-1).values - logits[:, vocab].mean(-1)
    print(f"    llama.cpp: best reduced logit - best outside logit >= {gap.min().item():.3f}; "
          f"torch: max_V - mean_V >= {spread.min().item():.3f} vs rounding bound "
          f"<= {bound.max().item():.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", type=Path, default=builtin_draft("smollm2-135m-draft"))
    parser.add_argument("--positions", type=int, default=200)
    parser.add_argument("--prompts", type=Path, default=None,
                        help="prompt set (default: ../shared/eval/prompts.jsonl)")
    parser.add_argument("--type", dest="types", action="append", default=None)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ensure_assembled(args.draft))
    ids = real_ids(tokenizer, args.positions, args.prompts)
    logits, hidden = torch_side(args.draft, ids)
    with tempfile.TemporaryDirectory() as out_dir:
        for gguf_type in args.types or ["q8_0", "f32"]:
            check(args.draft, gguf_type, ids, logits, hidden, Path(out_dir))


if __name__ == "__main__":
    main()
