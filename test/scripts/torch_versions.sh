#!/usr/bin/env bash
# Run dicp's tests against given torch releases, each in its own cached virtualenv:
#
#   bash test/scripts/torch_versions.sh [--suites "PATH..."] [--python PYTHON] VERSION...
#   bash test/scripts/torch_versions.sh 2.11.0 2.15.0                       # default suite
#   bash test/scripts/torch_versions.sh --suites "test/op test/unit" 2.11.0  # op + unit only
#
# Each VERSION gets ${XDG_CACHE_HOME:-~/.cache}/dicp/torch-envs/torch-VERSION-pyX.Y, made once
# with `pip install torch==VERSION` (the registry's default build: CUDA wheels, ~3 GB to
# download, ~5 GB on disk, run on the CPU here) and kept for later runs (a marker file says it
# is complete; delete the folder to rebuild it; pip keeps no second copy of the wheels in its
# cache). Every run installs this checkout into it editable (`pip install -e '.[test]'`) and
# fails if that changed its torch. Then it runs the quick start and pytest, and prints one
# line per version (with the checkout's commit) and the totals. --python picks the
# interpreter new environments are made from (default: python3). A lock per environment
# serializes concurrent runs.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ENVS=${XDG_CACHE_HOME:-$HOME/.cache}/dicp/torch-envs
BASE_PYTHON=python3
SUITES=test

usage() {
    echo "usage: bash $0 [--suites \"PATH...\"] [--python PYTHON] VERSION...  (e.g. 2.11.0 2.15.0)" >&2
    exit 2
}

installed_torch() {  # $1: environment; the installed torch's version, as pip sees it
    "$1/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null
}

make_env() {  # $1: environment, $2: torch version. The marker file is written last.
    local env=$1 version=$2
    rm -rf "$env"
    echo "== creating $env (pip install torch==$version)"
    "$BASE_PYTHON" -m venv "$env" &&
        "$env/bin/python" -m pip install --quiet --no-cache-dir "torch==$version" &&
        echo "$version" > "$env/.dicp-torch-ready"
}

install_dicp() {  # $1: environment. The checkout, editable; its torch must stay as it was.
    local env=$1 before after
    before=$(installed_torch "$env")
    "$env/bin/python" -m pip install --quiet -e "$REPO[test]" || return 1
    after=$(installed_torch "$env")
    if [ "$before" != "$after" ]; then
        echo "error: pip install -e '.[test]' replaced torch $before with $after" >&2
        return 1
    fi
}

checkout() {  # the commit under test, and whether the tree differs from it
    local commit
    commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null) || { echo "(no git)"; return; }
    [ -z "$(git -C "$REPO" status --porcelain 2>/dev/null)" ] || commit+=" + uncommitted changes"
    echo "$commit"
}

count() {  # $1: pattern (passed, failed, errors?), $2: log. Its number on pytest's last line.
    tail -n 1 "$2" | grep -oE "[0-9]+ $1\b" | grep -oE "^[0-9]+" || echo 0
}

run_version() {  # $1: torch version. Adds "version torch quickstart passed failed skipped seconds".
    local version=$1 python_tag env log start quickstart=FAIL
    python_tag=$("$BASE_PYTHON" -c 'import sys; print("py%d.%d" % sys.version_info[:2])') || return 1
    env="$ENVS/torch-$version-$python_tag"
    log="$ENVS/torch-$version-$python_tag.log"
    mkdir -p "$ENVS"
    exec 9>"$env.lock" && flock 9
    if [ ! -f "$env/.dicp-torch-ready" ]; then
        make_env "$env" "$version" || { echo "error: could not install torch==$version" >&2; return 1; }
    fi
    install_dicp "$env" || return 1
    start=$(date +%s)
    echo "== torch $(installed_torch "$env") in $env: quick start"
    (cd "$REPO" && "$env/bin/python" examples/quickstart.py) && quickstart=ok
    echo "== torch $(installed_torch "$env"): pytest $SUITES (log: $log)"
    # shellcheck disable=SC2086  # SUITES is a list of paths
    (cd "$REPO" && "$env/bin/python" -m pytest $SUITES -n auto -p no:cacheprovider -q -rs) 2>&1 | tee "$log"
    local failed=$(( $(count failed "$log") + $(count "errors?" "$log") ))
    local counts="$(count passed "$log") $failed $(count skipped "$log")"
    RESULTS+=("$version $(installed_torch "$env") $quickstart $counts $(( $(date +%s) - start ))")
    exec 9>&-
}

while [ $# -ge 2 ]; do
    case $1 in
        --suites) SUITES=$2; shift 2 ;;
        --python) BASE_PYTHON=$2; shift 2 ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
for version in "$@"; do [[ $version =~ ^[0-9]+\.[0-9]+ ]] || usage; done
RESULTS=()
CHECKOUT=$(checkout)
status=0
for version in "$@"; do
    run_version "$version" || { status=1; RESULTS+=("$version - setup-failed 0 0 0 0"); }
done

echo
echo "dicp $CHECKOUT"
printf "%-8s %-16s %-10s %7s %7s %7s %8s\n" torch installed quickstart passed failed skipped seconds
total_passed=0 total_failed=0
for row in "${RESULTS[@]}"; do
    read -r version installed quickstart passed failed skipped seconds <<< "$row"
    printf "%-8s %-16s %-10s %7s %7s %7s %8s\n" "$version" "$installed" "$quickstart" "$passed" "$failed" "$skipped" "$seconds"
    total_passed=$(( total_passed + passed )); total_failed=$(( total_failed + failed ))
    if [ "$quickstart" != ok ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then status=1; fi
done
echo "$total_passed passed, $total_failed failed"
exit $status
