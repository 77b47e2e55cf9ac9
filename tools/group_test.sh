#!/bin/bash
# --group NAME (issue #12): build and serve share the data dir with a Unix
# group (dirs 2750, files 0640, chgrp'ed), so `zerovec attach` run as ANOTHER
# uid in that group searches it, and the same uid outside the group cannot.
# Needs root and setpriv to switch uid; skips with the reason where it cannot.
set -uo pipefail

ZEROVEC_SRC="$PWD/tools/zerovec"
CHECKS="$PWD/tests/shell/checks.sh"
source "$CHECKS"

skip() {
  echo "SKIP: $1"
  exit 0
}
((EUID == 0)) || skip "needs root to run a reader as another uid"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
GROUP=""
for g in users nogroup staff; do
  if getent group "$g" >/dev/null; then GROUP=$g && break; fi
done
[[ -n "$GROUP" ]] || skip "no users/nogroup/staff group to share with"
GID=$(getent group "$GROUP" | cut -d: -f3)
OTHER=54321  # a uid with no files anywhere
setpriv --reuid=$OTHER --regid=$OTHER --clear-groups true 2>/dev/null ||
  skip "cannot switch to uid $OTHER here (user namespace?)"

# Under /tmp, not the runfiles tree (root's 0700 home): the other uid must reach
# the binary and the data dir; only the data dir's modes may stop it.
WORK=$(mktemp -d /tmp/zv-group-test.XXXXXX)
chmod 755 "$WORK"
SERVER_PID=""
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID"
  rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
cp "$ZEROVEC_SRC" zerovec && chmod 755 zerovec
printf '%s\n' '{"id": "a", "text": "alpha", "vector": [1, 0, 0, 0]}' \
  '{"id": "b", "text": "beta", "vector": [0, 1, 0, 0]}' >in.jsonl
echo "0 1 0 0" >q.txt
chmod 644 in.jsonl q.txt

as_member() { TMPDIR=/tmp setpriv --reuid=$OTHER --regid=$OTHER --groups="$GID" "$@"; }
as_outsider() { TMPDIR=/tmp setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$@"; }

# Every dir 2750 and file 0640, all of group $GROUP.
expect_shared() {
  local what=$1 dir=$2 bad
  bad=$(find "$dir" \( -type d ! -perm 2750 \) -o \( -type f ! -perm 640 \) \
    -o ! -group "$GROUP")
  if [[ -z "$bad" ]]; then
    echo "ok: $what"
  else
    echo "FAIL: $what: not 2750/0640 group $GROUP:"
    find $bad -maxdepth 0 -printf '  %M %g %p\n'
    failures=$((failures + 1))
  fi
}

# Starts `zerovec serve` on a data dir and waits for its port file.
serve() {
  rm -f port
  ./zerovec serve --data "$1" --model none --listen 127.0.0.1:0 \
    --port-file port "${@:2}" 2>serve.err &
  SERVER_PID=$!
  for _ in $(seq 100); do
    [[ -s port ]] && return 0
    sleep 0.1
  done
  echo "FAIL: serve did not start: $(cat serve.err)"
  failures=$((failures + 1))
}
stop() {
  kill "$SERVER_PID" && wait "$SERVER_PID"
  SERVER_PID=""
}

# build --group, then attach as the other uid: in the group it works...
./zerovec build --data data --collection c --input in.jsonl --model none \
  --group "$GROUP" >out 2>err
check "build --group $GROUP" 0 $?
expect_shared "build --group: data dir shared" data
as_member ./zerovec attach --data data --collection c --vector-file q.txt \
  -k 1 --json >out 2>err
check "attach as uid $OTHER in group $GROUP" 0 $?
contains "member's attach finds the row" out '"id":"b"'
# ... outside it, the same command is refused by the file modes.
as_outsider ./zerovec attach --data data --collection c --vector-file q.txt \
  -k 1 --json >out 2>err
check "attach as uid $OTHER outside the group" 1 $?
contains "outsider is refused" err "Permission denied"

# serve --group while a member attaches to the live store (RocksDB secondary
# over the server's fresh WAL and MANIFEST).
serve data --group "$GROUP"
as_member ./zerovec attach --data data --collection c --vector-file q.txt \
  -k 1 --json >out 2>err
check "attach as a member while serve --group runs" 0 $?
contains "attach during serve finds the row" out '"id":"b"'
expect_shared "serve --group: new files shared" data
stop

# A data dir made without --group is private; serving it with --group shares
# what is already there.
./zerovec build --data private --collection c --input in.jsonl --model none \
  >out 2>err
check "build without --group" 0 $?
as_member ./zerovec attach --data private --collection c --vector-file q.txt \
  -k 1 >out 2>err
check "no --group: a member of $GROUP cannot attach" 1 $?
serve private --group "$GROUP"
expect_shared "serve --group shares an existing data dir" private
as_member ./zerovec attach --data private --collection c --vector-file q.txt \
  -k 1 --json >out 2>err
check "attach after serve --group shared it" 0 $?
contains "shared dir attach finds the row" out '"id":"b"'
stop

# Clear errors: unknown group (usage, 2), a group the caller is not in (1).
./zerovec build --data bad --collection c --input in.jsonl --model none \
  --group no-such-group-zv >out 2>err
check "unknown group" 2 $?
contains "unknown group named" err "group 'no-such-group-zv' does not exist"
./zerovec serve --data bad --model none --group no-such-group-zv >out 2>err
check "serve: unknown group" 2 $?
mkdir -m 777 open
as_outsider ./zerovec build --data open/data --collection c --input in.jsonl \
  --model none --group "$GROUP" >out 2>err
check "group the caller is not in" 1 $?
contains "non-member named" err "not a member of group '$GROUP'"
[[ ! -e open/data ]] && echo "ok: refused before creating anything" ||
  { echo "FAIL: a refused build created open/data" && failures=$((failures + 1)); }

echo "$failures failures"
((failures == 0))
