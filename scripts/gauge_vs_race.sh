#!/usr/bin/env bash
# Measurement helper (issue 11): drives the real chat in tmux; see docs/benchmarks.md "The chat under load".
# Drive the real chat in tmux: ask, wait for the answer, F5 race, wait, capture the race notice.
# usage: gauge_vs_race.sh PAIR OUTFILE [extra chat args]
set -u
PAIR=$1; OUT=$2; shift 2
S=gv$$
cd "$(dirname "$0")/.."
tmux new-session -d -s keep$S 2>/dev/null; tmux set-option -g history-limit 60000
tmux new-session -d -s $S -x 200 -y 60 ".venv/bin/specchat chat --pair $PAIR $* ; sleep 3600"
wait_for() {  # wait_for PATTERN TIMEOUT
  local end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    if tmux capture-pane -p -t $S -S -50000 | grep -q -- "$1"; then return 0; fi
    sleep 1
  done
  echo "TIMEOUT waiting for $1" >> $OUT; return 1
}
status_ready() { tmux capture-pane -p -t $S | grep -q "▏ ready"; }
wait_busy_then_ready() {  # a job started (the status left "ready") and ended (it is back)
  local end=$((SECONDS + 30))
  while [ $SECONDS -lt $end ] && status_ready; do sleep 0.5; done
  end=$((SECONDS + 400))
  while [ $SECONDS -lt $end ] && ! status_ready; do sleep 1; done
  status_ready || echo "TIMEOUT waiting for ready" >> $OUT
}
ask_and_race() {  # ask_and_race LABEL TEXT
  local label=$1 text=$2
  tmux send-keys -t $S "$text" Enter
  wait_busy_then_ready
  sleep 3
  tmux send-keys -t $S F5
  wait_busy_then_ready
  sleep 13  # let the toast (12 s) go, so the transcript's own notice line is read whole
  echo "== $label" >> $OUT
  tmux capture-pane -p -t $S -S -50000 -J | grep -- "█ race: speculative" | tail -1 >> $OUT
  tmux capture-pane -p -t $S -S -50000 -J | grep -- "tokens · .*tok/s" | tail -2 >> $OUT
}
wait_for "target-only measured" 400
wait_for "passes)" 400  # the baseline is settled: "(3 passes)", possibly wrapped before "passes)"
tmux capture-pane -p -t $S | grep -E "target-only measured|pair |·" | head -5 >> $OUT
ask_and_race short "In three sentences, explain why the sky is blue."
ask_and_race long "Write a long story of about 400 words about a lighthouse keeper who finds a message in a bottle."
ask_and_race history-building "Explain how a steam engine works, in detail."
ask_and_race long-conversation "Now summarise everything we talked about in a few paragraphs."
tmux capture-pane -p -t $S -S -50000 -J > $OUT.screen
tmux kill-session -t $S; tmux kill-session -t keep$S
