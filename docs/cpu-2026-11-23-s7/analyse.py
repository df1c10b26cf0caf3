"""Recompute the gauge-vs-race figures of docs/benchmarks.md "Gauge vs race, session 7"
from dumped answer statistics: python analyse.py stats2.jsonl

Each line of the dump is {"race": bool, "stats": StatsSnapshot, "baseline": Baseline}
as dataclasses.asdict wrote them; a race follows the speculative answer it replays."""
import json
import sys

from specchat.chat.baseline import Baseline, decode_span, gauge_speedup
from specchat.chat.events import StatsSnapshot


def tuples(value):
    return tuple(tuples(v) for v in value) if isinstance(value, list) else value


def answers_and_races(path):
    """(speculative answer, its race, the baseline the answer was gauged with)."""
    answer = None
    for line in open(path):
        row = json.loads(line)
        stats = StatsSnapshot(**{k: tuples(v) for k, v in row["stats"].items()})
        baseline = Baseline(**{k: tuples(v) for k, v in row["baseline"].items()})
        if row["race"]:
            yield answer[0], stats, answer[1]
        else:
            answer = stats, baseline


def rate(stats):
    return stats.decode_tokens / stats.decode_s


for answer, race, baseline in answers_and_races(sys.argv[1]):
    ratio = rate(answer) / rate(race)
    gauge = gauge_speedup(answer, baseline)
    start, end = decode_span(answer)
    plain = baseline.plain_seconds(start, end)
    idle_forwards = sum(baseline.idle_forward_s(w, c, n) for w, n, c, _ in answer.target_forwards)
    drafted, draft_s = answer.decode_drafting
    idle = drafted * baseline.draft_step_s + idle_forwards
    additive = (plain + answer.decode_s - idle) / answer.decode_s
    forward_load = sum(f[3] for f in answer.target_forwards) / idle_forwards
    forward_gauge = forward_load * plain / answer.decode_s
    print(f"tok {answer.decode_tokens} ctx {start}-{end} race {ratio:.3f} "
          f"gauge {gauge:.3f} ({gauge / ratio:.2f}) additive {additive:.3f} ({additive / ratio:.2f}) "
          f"load {baseline.load_factor(answer):.2f} race-load {baseline.load_factor(race):.2f} "
          f"fwd-load {forward_load:.2f} draft-load {draft_s / (drafted * baseline.draft_step_s):.2f} "
          f"gauge_fwd {forward_gauge:.3f} ({forward_gauge / ratio:.2f})")
