#!/usr/bin/env bash
# Run the model suites with new_backendgraph: bash run_test_models.sh false|true|all
#   false: static shapes (static.ini)   true: dynamic shapes (dynamic.ini)   all: both
# TEST_DIR defaults to the test folder found from this script's location; BACKEND overrides the
# backend (e.g. BACKEND=aot_eager to check the suites themselves against torch).
set -uo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_DIR=${TEST_DIR:-$(cd "$SCRIPT_DIR/../../.." && pwd)}
BACKEND=${BACKEND:-new_backendgraph}

if [ $# -ne 1 ] || ! [[ "$1" =~ ^(false|true|all)$ ]]; then
    echo "usage: bash $0 false|true|all" >&2
    exit 2
fi

run_mode() {  # $1: false|true, $2: ini file
    echo "== $BACKEND models, dynamic=$1 =="
    # --confcutdir: the ini file lives below scripts/, and pytest would otherwise not load
    # test/conftest.py, which defines --backend and --dynamic.
    (cd "$TEST_DIR" && python -m pytest -c "$2" --rootdir "$TEST_DIR" --confcutdir "$TEST_DIR" \
        -p no:cacheprovider --durations=10 \
        --backend "$BACKEND" --dynamic "$1" -q)
    local status=$?
    if [ $status -eq 5 ]; then echo "error: no tests collected from $2" >&2; fi
    return $status
}

status=0
if [ "$1" != true ]; then run_mode false "$SCRIPT_DIR/static.ini" || status=$?; fi
if [ "$1" != false ]; then run_mode true "$SCRIPT_DIR/dynamic.ini" || status=$?; fi
exit $status
