#!/bin/bash
# Runs README.md's code blocks marked "```sh readme-test" as written, in a
# fresh directory where bazel-bin/tools/zerovec is the built binary, and checks
# what they print: the README's examples must work with the bundled model.
set -uo pipefail

README="$PWD/README.md"
ZEROVEC="$PWD/tools/zerovec"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/readme_test.XXXXXX")"
cd "$WORK"
mkdir -p bazel-bin/tools
ln -s "$ZEROVEC" bazel-bin/tools/zerovec

awk '/^```sh readme-test$/ {on = 1; next} /^```$/ {on = 0} on' "$README" >blocks.sh
if [[ ! -s blocks.sh ]]; then
  echo "FAIL: no readme-test blocks in README.md"; exit 1
fi
echo "running:"; cat blocks.sh
# A server that never starts would leave the port wait spinning: bound it.
timeout 45 bash -e blocks.sh >out 2>err
rc=$?
cat out err
failures=0
if [[ $rc != 0 ]]; then echo "FAIL: the README's commands exit $rc"; failures=1; fi
# The commands print hits in order: saw (hnsw), saw (ivfpq), then oven (attach).
hits=$(awk '$1 == "1" {print $3}' out | tr '\n' ' ')
if [[ "$hits" != "saw saw oven " ]]; then
  echo "FAIL: top hits were '$hits', expected 'saw saw oven '"; failures=1
fi
grep -q '^zerovec [0-9]' out || { echo "FAIL: no version line"; failures=1; }
echo "readme_test: $failures failure(s)"
exit $failures
