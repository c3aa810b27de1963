#!/usr/bin/env bash
# The op suite with new_backendgraph: bash run_test_ops.sh false|true|all [pytest options...]
# Same as `bash test/scripts/run_test_ops.sh new_backendgraph ...` (its header documents the
# options and variables); BACKEND overrides the backend.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../run_test_ops.sh" "${BACKEND:-new_backendgraph}" "$@"
