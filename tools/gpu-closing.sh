#!/bin/bash
# tools/gpu-closing.sh OUTDIR [PART...]: a session's closing measurement in one device
# call, when the device time left allows one call only, each part capped so
# that the whole fits 430 s: the prefill op's cold probe (every variant,
# T = 16..32768) with its breakdown, the report's fraction of the floor,
# PyTorch's read in the same call (the anchor), the cuBLAS bits
# (tools/cublas-bits.py), then the decode probe cold and warm and
# verify-decisions.  bin/, lib/ and build/gpu carried
# (tools/gpu-session.sh prepare).  OUTDIR gets summary.txt (read it first),
# the trials (JSON, gzip), the report and a log archive: at most 8 files.
# Parts, in the order named (default: prefill torch cublas decode warm
# verify); CAP_SCALE (a percentage, default 100) scales every cap.
set -u
out=${1:?usage: tools/gpu-closing.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bin=$root/bin
export HCTUNE_KERNELS=$root/kernels-src LD_LIBRARY_PATH=$root/build/gpu
tmp=$(mktemp -d /tmp/hctune-closing.XXXXXX)
logs=$tmp/logs
mkdir -p "$out" "$logs"
summary=$out/summary.txt
{ date -u; cat build/gpu/commit 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1; } > "$summary"

# step NAME LIMIT command...: stopped with SIGINT past LIMIT (a probe then
# still says where its time went); wall time and status into the summary.
step() {
  local name=$1 limit=$(( $2 * ${CAP_SCALE:-100} / 100 )); shift 2
  local t0=$(date +%s.%N)
  timeout -s INT -k 15 "$limit" "$@" > "$logs/$name.out" 2> "$logs/$name.err"
  local rc=$?
  printf "%-14s exit %3d  %6.1f s (cap %s s)\n" "$name" "$rc" \
    "$(awk "BEGIN { print $(date +%s.%N) - $t0 }")" "$limit" | tee -a "$summary"
}

P=$tmp/prefill.db D=$tmp/decode.db
shift
parts=${*:-prefill torch cublas decode warm verify}
prefill() {
step prefill-cold 125 env HCTUNE_DB="$P" "$bin/hctune" probe --op hc_read_prefill
{ echo "== prefill decisions and breakdown"; cat "$logs/prefill-cold.out"
  grep -A30 "where the time went" "$logs/prefill-cold.err" | head -30; } >> "$summary"
HCTUNE_DB=$P "$bin/hctune" show --op hc_read_prefill --json 2> /dev/null > "$tmp/prefill-trials.json"
python3 - "$tmp/prefill-trials.json" >> "$summary" 2>&1 <<'PY'
import json, sys, collections
tr = json.load(open(sys.argv[1]))
best, checks = {}, collections.defaultdict(lambda: [0, 0])
for t in tr:
    v, T = t["variant"], t["tokens"]
    if t["kind"] == "timing" and t["status"] == "pass" and t.get("median_us"):
        if (v, T) not in best or t["median_us"] < best[(v, T)][0]:
            best[(v, T)] = (t["median_us"], t.get("params"))
    if t["kind"] == "parity":
        checks[(v, T)][0 if t["status"] == "pass" else 1] += 1
Ts = sorted({T for (_, T) in best})
vs = sorted({v for (v, _) in best} | {v for (v, _) in checks})
print("== prefill: best us a read (cold) per variant x probed T; parity trials passed/failed over every T")
print("%-10s" % "variant" + "".join("%11d" % T for T in Ts) + "   parity")
for v in vs:
    p = sum(checks[k][0] for k in checks if k[0] == v); f = sum(checks[k][1] for k in checks if k[0] == v)
    print("%-10s" % v + "".join("%11s" % ("%.1f" % best[(v, T)][0] if (v, T) in best else "-") for T in Ts)
          + "   %d/%d" % (p, f))
for (v, T), (m, p) in sorted(best.items(), key=lambda x: (x[0][1], x[1][0])):
    if T in (2048, 8192, 32768): print("  T=%d %s %.1f %s" % (T, v, m, json.dumps(p, separators=(",", ":"))))
PY
gzip -c "$tmp/prefill-trials.json" > "$out/prefill-trials.json.gz"
HCTUNE_DB=$P "$bin/hctune" report --out "$out/report.html" > /dev/null 2>> "$summary"
echo "== the report's fraction of the floor" >> "$summary"
python3 - "$out/report.html" >> "$summary" 2>&1 <<'PY'
import re, sys, html
s = open(sys.argv[1]).read()
i = s.find("fraction of floor")
txt = re.sub(r"<[^>]+>", " ", s[i:i + 6000]) if i >= 0 else "no 'fraction of floor' in the report"
print(re.sub(r"\s+", " ", html.unescape(txt))[:1500])
PY
}
torch() {
step torch 55 python3 tools/torch-prefill.py --tokens 2048,8192,32768
{ echo "== PyTorch, same call"; cat "$logs/torch.out"; } >> "$summary"
}
cublas() {
step cublas 40 python3 tools/cublas-bits.py --no-profile --json "$out/cublas-bits.json"
{ echo "== cuBLAS bits"; cat "$logs/cublas.out"; tail -3 "$logs/cublas.err"; } >> "$summary"
}
decode() {
step decode-cold 45 env HCTUNE_DB="$D" "$bin/hctune" probe --tokens 1-8
{ echo "== decode cold"; cat "$logs/decode-cold.out"; } >> "$summary"
HCTUNE_DB=$D "$bin/hctune" show --op hc_read --json 2> /dev/null | gzip > "$out/decode-trials.json.gz"
}
warm() {
step decode-warm 30 env HCTUNE_DB="$D" "$bin/hctune" probe --tokens 1-8
{ echo "== decode warm"; cat "$logs/decode-warm.out"; } >> "$summary"
}
verify() {
step decode-verify 20 env HCTUNE_DB="$D" "$bin/hctune" verify-decisions --op hc_read
{ echo "== verify"; tail -25 "$logs/decode-verify.out"; } >> "$summary"
}
for part in $parts; do
  case $part in
    prefill|torch|cublas|decode|warm|verify) "$part" ;;
    *) echo "gpu-closing: unknown part '$part'" | tee -a "$summary" ;;
  esac
done
tar -C "$tmp" -czf "$out/logs.tgz" logs
rm -rf "$tmp"
cat "$summary"
