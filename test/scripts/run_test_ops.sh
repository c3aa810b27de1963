#!/usr/bin/env bash
# The op suite against any registered backend:
#   bash test/scripts/run_test_ops.sh BACKEND false|true|all [pytest options...]
#   false: static shapes   true: dynamic shapes   all: both, one run after the other
# BACKEND is a dynamo backend name (new_backendgraph, a vendor's, or inductor/aot_eager to check
# the tests themselves). Files: test/scripts/BACKEND/ops/{static,dynamic}.ini if the backend has
# them, else every test/op/test_*.py. Options after the mode go to pytest (-n 2, -k add,
# --seed-base 3). Environment: TEST_DIR (the test folder; default: found from this script),
# PYTHON (default: python). Op tests run with DICP_STRICT=1 and fail on any eager fallback the
# backend does not declare (Backend.expected_fallbacks), whatever DICP_STRICT and
# DICP_FALLBACK_OPS say.
exec bash "$(dirname "${BASH_SOURCE[0]}")/run_suite.sh" op "$@"
