# Sourced by the shell tests (tools/cli_test.sh, tests/gpu/e2e_test.sh): a
# counter of failures, the checks that feed it, and a server left running is
# killed on exit.
failures=0
SERVER_PID=""
cleanup() { [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null; }
trap cleanup EXIT

check() {  # check NAME EXPECTED_RC ACTUAL_RC
  if [[ "$2" != "$3" ]]; then
    echo "FAIL: $1: exit $3, expected $2"; failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}
contains() {  # contains NAME FILE TEXT
  if grep -qF -- "$3" "$2"; then echo "ok: $1"; else
    echo "FAIL: $1: '$3' not in $2:"; cat "$2"; failures=$((failures + 1)); fi
}
