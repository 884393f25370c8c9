#!/usr/bin/env python3
"""check_progress.py FILE CMD KIND STRICT OUTPUT: the --progress json stream
of `memwall CMD` in FILE: every line JSON (STRICT 1) or else a 'memwall
CMD:' text line; elapsed_s never decreasing; KIND grouped|forward|none: the
calibration stage events expected (embed, then per layer the grouped
stages or one forward, then layer; layers_done, eta_s and the rate
consistent); write events in order for quant and convert, none otherwise;
one final done event, ok, exit 0, output OUTPUT. Prints each problem and a
summary line; exit 1 when there is a problem. Standard library only."""
import json, sys
path, cmd, kind, strict, output = sys.argv[1:6]
errs = []
ev = []
for no, line in enumerate(open(path, encoding="utf-8", errors="strict").read().split("\n"), 1):
    if line == "":
        continue
    if not line.startswith("{"):
        if strict == "1" or not line.startswith("memwall %s:" % cmd):
            errs.append("line %d is neither JSON nor a 'memwall %s:' text line: %r" % (no, cmd, line[:120]))
        continue
    try:
        o = json.loads(line)
    except ValueError as e:
        errs.append("line %d does not parse: %s: %r" % (no, e, line[:120]))
        continue
    if not isinstance(o, dict) or o.get("cmd") != cmd:
        errs.append("line %d: not an object of cmd %s" % (no, cmd))
        continue
    ev.append(o)
if not ev:
    errs.append("no JSON events")
el = [o.get("elapsed_s") for o in ev]
if any(not isinstance(x, (int, float)) or x < 0 for x in el):
    errs.append("an event without a number elapsed_s >= 0")
elif any(b < a for a, b in zip(el, el[1:])):
    errs.append("elapsed_s decreases")
stages = [o for o in ev if o.get("event") == "stage"]
if kind == "none":
    if stages:
        errs.append("unexpected stage events")
else:
    per = (["attn_in", "attn_out", "ffn_in", "ffn_down"] if kind == "grouped" else ["forward"]) + ["layer"]
    n = stages[0]["n_layer"] if stages else 0
    if n < 1:
        errs.append("no stage events / n_layer")
    first = stages[0].get("first_layer") if stages else 0
    want = [("embed", "start", first), ("embed", "end", first)]
    for L in range(first, n):
        for s in per:
            want += [(s, "start", L), (s, "end", L)]
    got = [(o.get("stage"), o.get("state"), o.get("layer")) for o in stages]
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        errs.append("stage order: at event %d got %s, want %s (%d events, want %d)"
                    % (k, got[k] if k < len(got) else None, want[k] if k < len(want) else None,
                       len(got), len(want)))
    done_prev = 0
    for o in stages:
        for key in ("n_layer", "first_layer", "layers_done", "pass", "eta_s", "rate_layers_per_s", "run_s"):
            if key not in o:
                errs.append("stage event without %s: %s" % (key, o))
                break
        else:
            d = o["layers_done"]
            if o["n_layer"] != n or o["first_layer"] != first or o["pass"] != 1:
                errs.append("n_layer/first_layer/pass change: %s" % o)
            if d < done_prev or d > n - first:
                errs.append("layers_done %d after %d (n_layer %d)" % (d, done_prev, n))
            done_prev = d
            if o["stage"] == "layer" and o["state"] == "end" and d != o["layer"] - first + 1:
                errs.append("layer %d ends with layers_done %d" % (o["layer"], d))
            e, r = o["eta_s"], o["rate_layers_per_s"]
            if d == 0:
                if e is not None and not (isinstance(e, (int, float)) and e >= 0):
                    errs.append("bad eta_s before the first layer: %s" % o)
            elif not (isinstance(e, (int, float)) and e >= 0):
                errs.append("eta_s not a number >= 0 after a finished layer: %s" % o)
            if d > 0 and not (isinstance(r, (int, float)) and r > 0):
                errs.append("rate_layers_per_s not > 0 after a finished layer: %s" % o)
    if stages and (stages[-1]["layers_done"] != n - first or stages[-1]["eta_s"] != 0):
        errs.append("the last stage event: layers_done %s (want %d), eta_s %s (want 0)"
                    % (stages[-1]["layers_done"], n - first, stages[-1]["eta_s"]))
writes = [o for o in ev if o.get("event") == "write"]
if cmd in ("quant", "convert"):
    if not writes:
        errs.append("no write events")
    ti = [o.get("tensor") for o in writes]
    if any(b < a for a, b in zip(ti, ti[1:])) or any(o["tensor"] >= o["n_tensors"] for o in writes):
        errs.append("write tensor indexes: %s" % ti)
    if writes and writes[-1]["bytes_done"] != writes[-1]["bytes_total"]:
        errs.append("the last write event is not complete: %s" % writes[-1])
    if any(not isinstance(o.get("name"), str) or "eta_s" not in o for o in writes):
        errs.append("a write event without name / eta_s")
    if stages and writes and ev.index(writes[0]) < ev.index(stages[-1]):
        errs.append("write events before the end of the calibration")
elif writes:
    errs.append("unexpected write events")
d = ev[-1] if ev else {}
if d.get("event") != "done" or d.get("ok") is not True or d.get("exit") != 0 or d.get("output") != output:
    errs.append("the last event is not done/ok/exit 0/output %s: %s" % (output, d))
if sum(1 for o in ev if o.get("event") == "done") != 1:
    errs.append("not exactly one done event")
for e in errs:
    print("  " + e)
print("  %s: %d events (%d stage, %d write)" % (path.rsplit("/", 1)[-1], len(ev), len(stages), len(writes)))
sys.exit(1 if errs else 0)
