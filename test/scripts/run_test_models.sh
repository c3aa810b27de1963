#!/usr/bin/env bash
# The model suites against any registered backend:
#   bash test/scripts/run_test_models.sh BACKEND false|true|all [pytest options...]
#   false: static shapes   true: dynamic shapes   all: both, one run after the other
# BACKEND is a dynamo backend name (new_backendgraph, a vendor's, or inductor/aot_eager to check
# the suites themselves against torch). Files: test/scripts/BACKEND/models/{static,dynamic}.ini
# if the backend has them, else every test/model/test_*.py. Options after the mode go to pytest.
# Environment: TEST_DIR (the test folder; default: found from this script), PYTHON (default:
# python).
exec bash "$(dirname "${BASH_SOURCE[0]}")/run_suite.sh" model "$@" --durations=10
