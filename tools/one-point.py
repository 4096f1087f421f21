#!/usr/bin/env python3
"""one-point.py: copy an op folder, keeping only the variants named, each at
one parameter point, so that a profiler sees exactly the launches asked for.

  one-point.py SRC_OP_DIR DST_OP_DIR VARIANT[:NAME=V,NAME=V...|:*] ...

The baseline (and any variant a kept one names as its reference) is kept at
its first point.  A parameter not named keeps its first value; VARIANT:*
keeps every point of that variant.  The copy's
templates are the source's files (copied, not linked: a profile needs the
exact text).  Exit 1 with one line when a variant or value is unknown.
"""
import json
import os
import shutil
import sys


def die(msg):
    print("one-point: %s" % msg, file=sys.stderr)
    sys.exit(1)


def main(argv):
    if len(argv) < 4 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    src, dst = argv[1], argv[2]
    try:
        man = json.load(open(os.path.join(src, "manifest.json")))
    except (OSError, ValueError) as e:
        die("%s/manifest.json: %s" % (src, e))
    by_name = {v["name"]: v for v in man["variants"]}
    want = {}
    for spec in argv[3:]:
        name, _, params = spec.partition(":")
        if name not in by_name:
            die("%s: no variant '%s' (have %s)" % (src, name, ", ".join(by_name)))
        fixed = {}
        if params == "*":
            want[name] = None
            continue
        for kv in filter(None, params.split(",")):
            k, _, v = kv.partition("=")
            fixed[k] = v
        want[name] = fixed
    for v in man["variants"]:
        if v["class"] == "baseline":
            want.setdefault(v["name"], {})
    for name in list(want):
        ref = by_name[name].get("reference")
        if ref:
            want.setdefault(ref, {})
    kept = []
    for v in man["variants"]:
        if v["name"] not in want:
            continue
        fixed = want[v["name"]]
        if fixed is None:
            kept.append(v)
            continue
        names = {p["name"] for p in v["params"]}
        for k in fixed or {}:
            if k not in names:
                die("%s: variant %s has no parameter %s" % (src, v["name"], k))
        for p in v["params"]:
            if p["name"] in fixed:
                val = [x for x in p["values"] if str(x) == fixed[p["name"]]]
                if not val:
                    die("%s: %s=%s is not among %s" % (v["name"], p["name"], fixed[p["name"]], p["values"]))
                p["values"] = val
            else:
                p["values"] = p["values"][:1]
        kept.append(v)
    man["variants"] = kept
    man.pop("families", None) if not any(f in want for f in man.get("families", [])) else None
    shutil.copytree(src, dst, dirs_exist_ok=True)
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(man, f, indent=2)
    print("one-point: %s: %s" % (dst, ", ".join(
        "%s(%s)" % (v["name"], ",".join("%s=%s" % (p["name"], p["values"][0]) for p in v["params"]))
        for v in kept)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
