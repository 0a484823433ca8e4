#!/usr/bin/env bash
# `swzc tune` over the suite against the per-file loop (`swzc rewrite FILE --bench`), on one GPU.
#
# Runs ON THE GPU MACHINE, from the repository root, with swzc installed (its wheel and dependencies):
#   OUT=/some/dir HW=h100 bash bench/fleet/tune_vs_loop.sh tune    # tune, killed at KILL_AFTER s, then run again
#   OUT=/some/dir HW=h100 bash bench/fleet/tune_vs_loop.sh loop    # the per-file loop over the same files
#   python3 bench/fleet/compare.py OUT                            # the choices side by side (OUT/tune.json, OUT/loop.json)
# Environment: OUT (results, default ./fleet_out), HW (swzc's hardware model, default h200), KILL_AFTER (seconds
# before the first tune run is killed with SIGKILL, default 120), FILES (default: every file of the suite).
set -uo pipefail
OUT="${OUT:-./fleet_out}"
HW="${HW:-h200}"
KILL_AFTER="${KILL_AFTER:-120}"
SPEC=bench/suite/launch_specs.toml
mkdir -p "$OUT"
read -r -a FILES <<<"${FILES:-$(ls bench/suite/kernels/*.cu | tr '\n' ' ')}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1

case "${1:-}" in
tune)
  STORE="$OUT/tune.sqlite"
  rm -f "$STORE"
  start=$(date +%s.%N)
  timeout -s KILL "$KILL_AFTER" swzc tune "${FILES[@]}" --hw "$HW" --launch-spec "$SPEC" --store "$STORE" -v \
    >"$OUT/tune_first.txt" 2>"$OUT/tune_first.err"
  echo "first run: exit $? after $(python3 -c "import time; print(round(time.time() - $start, 1))") s (killed at $KILL_AFTER s)" \
    | tee "$OUT/tune_first.status"
  python3 - "$STORE" >"$OUT/stored_after_kill.json" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
print(json.dumps([{"file": f, "kernel": k, "status": s, "chosen": c} for f, k, s, c in
                  con.execute("SELECT file, kernel, status, chosen FROM results ORDER BY file, line")], indent=1))
PY
  start=$(date +%s.%N)
  swzc tune "${FILES[@]}" --hw "$HW" --launch-spec "$SPEC" --store "$STORE" --json >"$OUT/tune.json" 2>"$OUT/tune_second.err"
  echo "second run: exit $? after $(python3 -c "import time; print(round(time.time() - $start, 1))") s" | tee "$OUT/tune_second.status"
  tail -n 1 "$OUT/tune_second.err"
  ;;
loop)
  work=$(mktemp -d)
  for f in "${FILES[@]}"; do
    name=$(basename "$f" .cu)
    start=$(date +%s.%N)
    swzc rewrite "$f" --bench --hw "$HW" --launch-spec "$SPEC" --json -o "$work/$name.cu" >"$work/$name.json" 2>"$work/$name.err"
    echo "$name exit $? $(python3 -c "import time; print(round(time.time() - $start, 1))") s" | tee -a "$OUT/loop_status.txt"
  done
  python3 - "$work" >"$OUT/loop.json" <<'PY'
import json, pathlib, sys
docs = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        docs.append(json.loads(path.read_text()))
    except ValueError:
        docs.append({"file": path.stem + ".cu", "error": (path.with_suffix(".err")).read_text()[-2000:]})
print(json.dumps(docs, indent=1))
PY
  rm -rf "$work"
  ;;
*)
  echo "usage: bash bench/fleet/tune_vs_loop.sh tune|loop" >&2
  exit 2
  ;;
esac
