import json, sys
from specchat.chat.baseline import Baseline, gauge_speedup, decode_span
from specchat.chat.events import StatsSnapshot
rows=[json.loads(l) for l in open(sys.argv[1])]
def snap(d):
    d=dict(d)
    for k in ('per_position_acceptance','histogram'): d[k]=tuple(d[k])
    d['target_forwards']=tuple(tuple(x) for x in d['target_forwards']); d['decode_drafting']=tuple(d['decode_drafting'])
    return StatsSnapshot(**d)
def base(b):
    b=dict(b); b['sampling']=tuple(b['sampling'])
    for k in ('step_points','verify_s','forward_points'): b[k]=tuple(tuple(x) for x in b[k])
    return Baseline(**b)
prev=None
for r in rows:
    s=snap(r['stats']); b=base(r['baseline'])
    if not r['race']:
        prev=(s,b); continue
    a,b=prev
    race=s.decode_tokens/s.decode_s and (a.decode_tokens/a.decode_s)/(s.decode_tokens/s.decode_s)
    g=gauge_speedup(a,b)
    start,end=decode_span(a); plain=b.plain_seconds(start,end)
    load=b.load_factor(a)
    # additive: overhead seconds = live model+gap - idle expected
    dd=a.decode_drafting; idle=(dd[0]*b.draft_step_s)+sum(b.idle_forward_s(w,c,n) for w,n,c,_ in a.target_forwards)
    over=a.decode_s-idle
    add=(plain+over)/a.decode_s
    # race's own load
    rl=b.load_factor(s)
    print(f"tok {a.decode_tokens} ctx {start}-{end} race {race:.3f} gauge {g:.3f} ({g/race:.2f}) additive {add:.3f} ({add/race:.2f}) load {load:.2f} race-load {rl:.2f} plain_idle {plain:.2f} race_s {s.decode_s:.2f} over {over:.2f}")
print("forward-only load")
prev=None
for r in rows:
    s=snap(r['stats']); b=base(r['baseline'])
    if not r['race']:
        prev=(s,b); continue
    a,b=prev
    race=(a.decode_tokens/a.decode_s)/(s.decode_tokens/s.decode_s)
    live=sum(x[3] for x in a.target_forwards); idle=sum(b.idle_forward_s(w,c,n) for w,n,c,_ in a.target_forwards)
    fl=live/idle
    start,end=decode_span(a); plain=b.plain_seconds(start,end)
    g=fl*plain/a.decode_s
    dd=a.decode_drafting
    print(f"fwd-load {fl:.2f} race-load {b.load_factor(s):.2f} draft-load {dd[1]/(dd[0]*b.draft_step_s):.2f} gauge_fwd {g:.3f} ({g/race:.2f})")
