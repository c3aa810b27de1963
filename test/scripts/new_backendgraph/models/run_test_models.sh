#!/usr/bin/env bash
# The model suites with new_backendgraph: bash run_test_models.sh false|true|all [pytest options]
# Same as `bash test/scripts/run_test_models.sh new_backendgraph ...` (its header documents the
# options and variables); BACKEND overrides the backend (e.g. BACKEND=aot_eager).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../run_test_models.sh" "${BACKEND:-new_backendgraph}" \
    "$@"
