#!/usr/bin/env bash
# Measurement helper (issue 11): drives the real chat in tmux; see docs/benchmarks.md "The chat under load".
# chat_rate.sh LABEL PYPRELUDE CHATARGS... : one long answer in the real chat (tmux); prints its
# summary line and the UI (main) thread's CPU share while it streamed.
set -u
LABEL=$1; PRE=$2; shift 2
S=cr$$
cd "$(dirname "$0")/.."
tmux new-session -d -s $S -x 200 -y 60 ".venv/bin/python -c \"import sys; $PRE; sys.argv=['specchat','chat']+sys.argv[1:]; from specchat.cli import main; main()\" $* ; sleep 3600"
end=$((SECONDS+400)); until tmux capture-pane -p -t $S | grep -q "target-only measured" || [ $SECONDS -gt $end ]; do sleep 1; done
PID=$(pgrep -f "python -c import sys" | tail -1)
tmux send-keys -t $S "Write a long story of about 400 words about a lighthouse keeper who finds a message in a bottle." Enter
sleep 1
cpu() { awk '{print $14+$15}' /proc/$PID/task/$PID/stat; }
c0=$(cpu); t0=$(date +%s.%N)
end=$((SECONDS+400)); until tmux capture-pane -p -t $S -S -2000 | grep -q " tokens · " || [ $SECONDS -gt $end ]; do sleep 0.5; done
c1=$(cpu); t1=$(date +%s.%N)
share=$(python3 -c "print(f'{($c1-$c0)/100/($t1-$t0):.2f}')")
echo "$LABEL: $(tmux capture-pane -p -t $S -S -2000 -J | grep -- ' tokens · ' | tail -1 | sed 's/ *▏.*//') · ui thread $share"
tmux kill-session -t $S
