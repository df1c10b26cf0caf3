"""Generate teacher shards only (the first step of `specchat distill`), with a chosen batch size.

    PYTHONPATH=. python docs/generate_teacher.py OUT TOKENS THREADS [BATCH] [SEED] [PROMPTS]

Used for the second data stage of the shipped draft (docs/distill.md):
OUT=/work/distill-more TOKENS=360000 THREADS=2 BATCH=128 SEED=100
PROMPTS=docs/distill-prompts-more.jsonl. The shards land in OUT/teacher; a later
`specchat distill --out DIR` reads every `shard-*.pt` in DIR/teacher, so shards
from several generation runs are combined by putting them (or links to them)
side by side under distinct names.
"""
import sys
import time
from pathlib import Path

import torch

from specchat.distill.teacher import generate_shards, read_prompts
from specchat.models.loader import eos_token_ids, load_model
from specchat.models.config.refs import parse_ref

out, tokens, threads = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
batch = int(sys.argv[4]) if len(sys.argv) > 4 else 128
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 100
prompts = read_prompts(Path(sys.argv[6] if len(sys.argv) > 6 else "docs/distill-prompts-more.jsonl"))
torch.set_num_threads(threads)
model, tokenizer = load_model(parse_ref("builtin:smollm2-135m-instruct"), torch.bfloat16, "cpu", "none")
start, first = time.time(), []


def report(done: int, total: int) -> None:
    first.append(done)
    rate = (done - first[0]) / (time.time() - start)
    print(f"{time.strftime('%H:%M:%S')} {done}/{total} answer tokens, {rate:.1f} tok/s", flush=True)


generate_shards(model, tokenizer, eos_token_ids(model, tokenizer), prompts, out / "teacher", tokens,
                batch, 128, seed, report)
