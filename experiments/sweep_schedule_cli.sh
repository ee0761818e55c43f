#!/usr/bin/env bash
# The CLI on every realistic workload and every HLO fixture (issue 11, "Done when"):
#   mallocgame schedule W.json -o W2.json; mallocgame solve W.json --solver greedy-xla --reschedule -o A.csv;
#   mallocgame validate A.workload.json A.csv (the answer against the re-scheduled workload, order checked).
# Run from the project root:  bash experiments/sweep_schedule_cli.sh [OUT_DIR]   (about 5 minutes)
set -u
out=${1:-$(mktemp -d)}
M="nice python -m mallocgame.cli.main"
mkdir -p "$out/in"
$M suites realistic --export "$out/in" > /dev/null
for f in tests/data/*.hlo.txt; do
  $M import hlo "$f" -o "$out/in/hlo_$(basename "$f" .hlo.txt).json" > /dev/null
done
ok=0; bad=0
for w in "$out"/in/*.json; do
  n=$(basename "$w" .json)
  s=$($M schedule "$w" -o "$out/$n.s.json" --time-limit 1 2>&1); rs=$?
  $M solve "$w" --solver greedy-xla --reschedule --time-limit 2 -o "$out/$n.csv" > "$out/$n.solve.txt" 2>&1; ro=$?
  v=$($M validate "$out/$n.workload.json" "$out/$n.csv" 2>/dev/null); rv=$?
  echo "$n: schedule exit $rs, solve --reschedule exit $ro, validate exit $rv | ${s%%;*} | ${v:0:60}"
  if [ $rs = 0 ] && [ $ro = 0 ] && [ $rv = 0 ]; then ok=$((ok+1)); else bad=$((bad+1)); fi
done
echo "all three exit 0 on $ok inputs; not on $bad"
