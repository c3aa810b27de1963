"""Run the op suite several times with different seeds and list every test that failed in any run.

    python test/scripts/find_flaky.py [--runs 5] [--first-seed 1] [--backend new_backendgraph]
                                      [--mode all] [pytest options, e.g. -n 2 -k norm]

Run i uses `--seed-base FIRST_SEED + i` (run_test_ops.sh), so every test draws other inputs in
every run, and each failure can be rerun alone with the printed command: the same seed base
draws the same numbers. Prints one line per run and mode (pytest's counts), then each failing
test with the seeds it failed under; exits 1 if any test failed. Full logs stay in a temporary
folder, named at the end.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
MODE_HEADER = re.compile(r"^== \S+ ops, dynamic=(\w+)")
FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)")
COUNTS = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--backend", default="new_backendgraph")
    parser.add_argument(
        "--mode",
        choices=("false", "true", "all"),
        default="all",
        help="static (false), dynamic (true) or both (all, the default)",
    )
    return parser.parse_known_args()


def run_suite(args, seed, pytest_options, log):
    command = [
        "bash",
        str(SCRIPTS / "run_test_ops.sh"),
        args.backend,
        args.mode,
        "--seed-base",
        str(seed),
        *pytest_options,
    ]
    with open(log, "w") as out:
        status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
    return status, log.read_text().splitlines()


def summarize(lines):
    """(mode -> pytest's count line, [(mode, test id)] of failures) from one run's output."""
    mode, counts, failures = "?", {}, []
    for line in lines:
        if header := MODE_HEADER.match(line):
            mode = "dynamic" if header.group(1) == "true" else "static"
        elif failure := FAILURE.match(line):
            failures.append((mode, failure.group(2)))
        elif count := COUNTS.match(line):
            counts[mode] = count.group(1)
    return counts, failures


def main():
    args, pytest_options = parse_args()
    logs = Path(tempfile.mkdtemp(prefix="dicp-flaky-"))
    failed_seeds = defaultdict(list)  # (mode, test id) -> seeds it failed under
    for seed in range(args.first_seed, args.first_seed + args.runs):
        status, lines = run_suite(args, seed, pytest_options, logs / f"seed-{seed}.log")
        counts, failures = summarize(lines)
        shown = "; ".join(f"{mode}: {text}" for mode, text in counts.items()) or "no summary"
        print(f"--seed-base {seed}: {shown} (exit {status})", flush=True)
        for failure in failures:
            failed_seeds[failure].append(seed)
        if status != 0 and not failures:
            failed_seeds[("?", f"run exited {status} without a failing test")].append(seed)
    report(args, failed_seeds, logs)
    return 1 if failed_seeds else 0


def report(args, failed_seeds, logs):
    print(f"\n{len(failed_seeds)} test(s) failed in at least one of {args.runs} run(s)")
    for (mode, test), seeds in sorted(failed_seeds.items()):
        print(f"  {test} ({mode}) failed with --seed-base {', '.join(map(str, seeds))}")
        print(
            f"    rerun: cd {SCRIPTS.parent} && python -m pytest '{test}' "
            f"--backend {args.backend} --dynamic all --seed-base {seeds[0]}"
        )
    print(f"logs: {logs}")


if __name__ == "__main__":
    sys.exit(main())
