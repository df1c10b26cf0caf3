#!/usr/bin/env bash
# Measurement helper (issue 12): specchat's target-only decoding against llama-bench's tg figure
# on the same GGUF file and thread count, at the same context depth, interleaved N times.
#
#   scripts/llama_bench_anchor.sh LLAMA_BENCH GGUF [N] [TOKENS]
#
# `specchat run -k 0` decodes TOKENS tokens greedily after a chat-templated prompt of P tokens;
# llama-bench's `tg` runs with `-d P` so both decode at the same context lengths (decode speed
# falls with depth: on the 2-core CPU of 2026-11-23, 105 tok/s at depth 1, 69 at depth 500).
# Prints each pair of figures, then the medians and their ratio. Run on a quiet machine.
set -eu
LB=$1; GGUF=$2; N=${3:-8}; TOKENS=${4:-128}
cd "$(dirname "$0")/.."
THREADS=$(.venv/bin/python -c "from specchat.models.llamacpp.model import physical_cores; print(physical_cores())")
Q="Write a long story of about 400 words about a lighthouse keeper who finds a message in a bottle."
run() { .venv/bin/specchat run -k 0 --temperature 0 --max-new-tokens "$TOKENS" --jsonl "$Q" 2>/dev/null | tail -1; }
P=$(run | python3 -c "import json,sys; print(json.load(sys.stdin)['stats']['prompt_tokens'])")
echo "depth $P, $TOKENS tokens, $THREADS threads, $N interleaved pairs"
for i in $(seq "$N"); do
  lb=$("$LB" -m "$GGUF" -t "$THREADS" -p 0 -n "$TOKENS" -d "$P" -r 1 -o json 2>/dev/null \
       | python3 -c "import json,sys; print(round(json.load(sys.stdin)[0]['avg_ts'], 1))")
  sc=$(run | python3 -c "import json,sys; s=json.load(sys.stdin)['stats']; print(round(s['tokens_per_s'], 1))")
  echo "llama-bench $lb  specchat $sc"
done | tee /dev/stderr | python3 -c "
import statistics, sys
pairs = [(float(l.split()[1]), float(l.split()[3])) for l in sys.stdin]
lb, sc = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
print(f'median llama-bench {lb:.1f} tok/s, specchat run -k 0 {sc:.1f} tok/s: {sc / lb:.2f}x')"
