#!/usr/bin/env bash
# The body of run_test_ops.sh and run_test_models.sh:
#   bash run_suite.sh op|model BACKEND false|true|all [pytest options...]
# Files come from scripts/BACKEND/<ops|models>/{static,dynamic}.ini when the backend has them,
# else every test_*.py of the op/ or model/ folder. Exit status: pytest's, and 5 (no tests
# collected) is a failure too.
set -uo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_DIR=${TEST_DIR:-$(cd "$SCRIPT_DIR/.." && pwd)}
PYTHON=${PYTHON:-python}

usage() {
    echo "usage: bash $0 op|model BACKEND false|true|all [pytest options...]" >&2
    exit 2
}
[ $# -ge 3 ] && [[ "$1" =~ ^(op|model)$ ]] && [[ "$3" =~ ^(false|true|all)$ ]] || usage
KIND=$1 BACKEND=$2 MODE=$3
shift 3
INI_DIR="$SCRIPT_DIR/$BACKEND/${KIND}s"

run_mode() {  # $1: false|true, $2: ini name, then pytest options
    local dynamic=$1 files=("$KIND") config=()
    if [ -f "$INI_DIR/$2" ]; then files=(); config=(-c "$INI_DIR/$2"); fi
    shift 2
    echo "== $BACKEND ${KIND}s, dynamic=$dynamic (${config[1]:-every test in $TEST_DIR/$KIND}) =="
    # --rootdir/--confcutdir: an ini file below scripts/ would otherwise make pytest skip
    # test/conftest.py, which registers --backend, --dynamic and the harness. log_level: a
    # failure report shows dicp's warnings, not torch's debug trace. --with-slow: a backend's
    # suite is every test, the slow tier (test/common/tiers.py) included.
    (cd "$TEST_DIR" && "$PYTHON" -m pytest "${config[@]}" "${files[@]}" --rootdir "$TEST_DIR" \
        --confcutdir "$TEST_DIR" -p no:cacheprovider -o log_level=WARNING --with-slow \
        --backend "$BACKEND" --dynamic "$dynamic" -q "$@")
    local status=$?
    if [ $status -eq 5 ]; then echo "error: no tests collected (dynamic=$dynamic)" >&2; fi
    return $status
}

status=0
if [ "$MODE" != true ]; then run_mode false static.ini "$@" || status=$?; fi
if [ "$MODE" != false ]; then run_mode true dynamic.ini "$@" || status=$?; fi
exit $status
