#!/usr/bin/env bash
# Runs every ZeroVec test: installs what is missing, then `bazel test //...` (the
# CPU build; CUDA tests live behind --config=cuda and run on a GPU machine, see
# README). Ends with one line "N passed, N failed" counted from the test results.
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

BAZEL_FLAGS=(--jobs=2 --local_ram_resources=HOST_RAM*.5 --local_cpu_resources=2)
status=0
bazel test "${BAZEL_FLAGS[@]}" //... || status=$?

# Count test cases from the JUnit XML every test target leaves; a target that died
# before writing its XML counts as one failure.
bazel query 'tests(//...) except attr(tags, manual, //...)' 2>/dev/null >/tmp/zerovec_tests.$$
/usr/bin/python3 - "$status" /tmp/zerovec_tests.$$ <<'PY'
import os, sys, xml.etree.ElementTree as ET
passed = failed = skipped = 0
for label in open(sys.argv[2]).read().split():
    package, name = label.lstrip("/").split(":")
    xml_path = os.path.join("bazel-testlogs", package, name, "test.xml")
    try:
        root = ET.parse(xml_path).getroot()
    except Exception:
        failed += 1
        continue
    cases = root.iter("testcase")
    any_case = False
    for case in cases:
        any_case = True
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    if not any_case:  # a non-gtest test (sh_test): Bazel's XML holds its verdict
        bad = root.find(".//failure") is not None or root.find(".//error") is not None
        failed += bad
        passed += not bad
if int(sys.argv[1]) != 0 and failed == 0:
    failed = 1  # bazel failed (e.g. a build error) though no test case reported one
print(f"({skipped} skipped)")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
rc=$?
rm -f /tmp/zerovec_tests.$$
exit $rc
