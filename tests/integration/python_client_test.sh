#!/bin/bash
# Runs the Python client test with Debian's python3 (python3-grpcio, python3-grpc-tools).
set -euo pipefail
exec /usr/bin/python3 tests/integration/python_client_test.py tools/zerovec \
  proto/zerovec/v1/zerovec.proto
