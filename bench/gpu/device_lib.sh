# Sourced by the GPU device scripts: el (seconds since T0) and step, which runs
# one capped command of a device call. Set before sourcing: T0 (start, epoch
# s), DEADLINE (s), OUT (log folder), SUM (summary file); optionally
# STEP_GREP, the lines of each step's log copied to the summary.
el() { echo $(($(date +%s) - T0)); }
step() { # step NAME MAX_SECONDS CMD...: log in $OUT/NAME.log
  local name=$1 max=$2
  shift 2
  local left=$((DEADLINE - $(el)))
  ((left < max)) && max=$left
  if ((max < 10)); then
    echo "== $name SKIPPED (deadline, t=$(el)s)" | tee -a "$SUM"
    return 1
  fi
  timeout "$max" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc t=$(el)s" | tee -a "$SUM"
  grep -E "${STEP_GREP:-PASSED|FAILED|SKIPPED|Failure|RESULT|error}" \
    "$OUT/$name.log" | cut -c1-300 | tail -n "${STEP_LINES:-24}" | tee -a "$SUM"
  return $rc
}
