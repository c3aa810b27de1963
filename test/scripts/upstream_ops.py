"""Run DICP's own op tests (DeepLink-org/deeplink.framework, dicp/test/op/) unchanged against a
backend, through this project's harness, and print a table of the results.

DICP's files are public code kept out of this repository: they live in a scratch folder
(default `<DICP_CACHE_DIR>/upstream-tests/src/op/`, fetched once by hand, see `--help` and
upstream_ops_manifest.tsv, which gives each file's repository path, commit, size and sha256).
The run copies them next to a fresh copy of test/common/ in the layout DICP expects:

    <cache>/upstream-tests/run-<backend>/test/{__init__.py, common/, op/}

and runs `python -m pytest test/op --backend B --dynamic false|true` there with DICP_STRICT=1
(the harness holds op tests to native ops unless `--allow-fallback`). With `--reference
aot_eager` every failure is run again with that backend: a failure it shares fails for every
backend on CPU (a vendor-only op, a test that assumes a device other than the CPU), the others
are the backend's own.

    python test/scripts/upstream_ops.py --backend new_backendgraph --dynamic all \\
        --reference aot_eager -- -n 2
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter, defaultdict
from pathlib import Path

REPO_TEST = Path(__file__).resolve().parents[1]
MANIFEST = Path(__file__).with_name("upstream_ops_manifest.tsv")


def default_root():
    from dicp import config

    return Path(config.cache_dir) / "upstream-tests"


# ---- the scratch tree ------------------------------------------------------------------------


def manifest_rows(manifest):
    """(path under src/, repository commit, size, sha256) for each fetched file."""
    lines = manifest.read_text().splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def check_sources(src, manifest):
    """Each manifest file present in `src` with its recorded sha256: the tests are DICP's."""
    problems = []
    for path, _commit, _size, digest in manifest_rows(manifest):
        file = src / path
        if not file.is_file():
            problems.append(f"missing {file}")
        elif hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            problems.append(f"{file} differs from the manifest (sha256)")
    if problems:
        sys.exit(f"error: the DICP sources do not match {manifest}:\n  " + "\n  ".join(problems))


def build_tree(src, run_dir):
    """run_dir/test: our test/common and DICP's op folder (with its conftest.py), as packages."""
    shutil.rmtree(run_dir, ignore_errors=True)
    tree = run_dir / "test"
    shutil.copytree(
        REPO_TEST / "common", tree / "common", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(src / "op", tree / "op", ignore=shutil.ignore_patterns("__pycache__"))
    for package in (tree, tree / "op"):
        (package / "__init__.py").touch()
    return tree


# ---- running and reading results ---------------------------------------------------------------


def run_pytest(run_dir, backend, dynamic, junit, targets, extra):
    command = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "--backend",
        backend,
        "--dynamic",
        dynamic,
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "log_level=WARNING",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
        "--continue-on-collection-errors",
        *extra,
    ]
    env = dict(
        os.environ,
        DICP_STRICT="1",
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(REPO_TEST.parent), os.environ.get("PYTHONPATH")])
        ),
    )
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=run_dir, env=env, check=False)


def read_junit(junit):
    """One dict per test case: file, nodeid, outcome, reason, fallbacks."""
    cases = []
    for case in ElementTree.parse(junit).iter("testcase"):
        path, node = identify(case)
        cases.append(
            dict(file=Path(path).name, nodeid=node, **outcome(case), fallbacks=fallbacks(case))
        )
    return cases


def identify(case):
    """(file path, pytest node id) of a junit test case; a collection error names its module."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:
        path = name.replace(".", "/") + ".py"
        return path, path
    path = case.get("file") or classname.rsplit(".", 1)[0].replace(".", "/") + ".py"
    module = path.removesuffix(".py").replace("/", ".")
    classes = classname[len(module) + 1 :].split(".") if classname != module else []
    return path, "::".join([path, *filter(None, classes), name])


def outcome(case):
    for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        element = case.find(tag)
        if element is not None:
            return dict(outcome=name, reason=first_line(element))
    return dict(outcome="passed", reason="")


def first_line(element):
    """The assertion or exception that decided the outcome, on one line."""
    text = element.text or ""
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    reason = next((e for e in errors if e), None) or element.get("message", "")
    return " ".join(reason.split())[:200].replace("|", "/")  # a cell of a markdown table


def fallbacks(case):
    return [p.get("value") for p in case.iter("property") if p.get("name") == "eager_fallback"]


# ---- the report ------------------------------------------------------------------------------


def file_table(cases, shared):
    rows = [
        "| file | tests | passed | failed | skipped | failures (reason) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    by_file = defaultdict(list)
    for case in cases:
        by_file[case["file"]].append(case)
    for file, group in sorted(by_file.items()):
        count = Counter(c["outcome"] for c in group)
        bad = [c for c in group if c["outcome"] in ("failed", "error")]
        reasons = Counter(
            f"{c['reason']}{' [also ' + shared + ']' if c.get('shared') else ''}" for c in bad
        )
        text = "; ".join(f"{n}x {r}" for r, n in reasons.most_common())
        rows.append(
            f"| {file} | {len(group)} | {count['passed']} | "
            f"{count['failed'] + count['error']} | {count['skipped']} | {text} |"
        )
    return rows


def summary(backend, mode, cases, shared):
    count = Counter(c["outcome"] for c in cases)
    failed = [c for c in cases if c["outcome"] in ("failed", "error")]
    own = [c for c in failed if not c.get("shared")]
    with_fallback = sum(1 for c in cases if c["outcome"] == "passed" and c["fallbacks"])
    line = (
        f"upstream ops {backend} dynamic={mode}: {len(cases)} tests, {count['passed']} "
        f"passed ({with_fallback} with eager fallback), {len(failed)} failed, "
        f"{count['skipped']} skipped"
    )
    if shared:
        line += f"; {len(failed) - len(own)} also fail with {shared}, {len(own)} do not"
    return line


def fallback_table(cases):
    ops = Counter(f for c in cases if c["outcome"] == "passed" for f in c["fallbacks"])
    return [f"- {op}: {n} passing tests" for op, n in ops.most_common()]


def mark_shared(cases, reference_cases):
    """A failure is shared when the reference backend fails the same test (a collection
    error: the same file)."""
    failing = {c["nodeid"] for c in reference_cases if c["outcome"] in ("failed", "error")}
    for case in cases:
        if case["outcome"] in ("failed", "error"):
            case["shared"] = case["nodeid"] in failing


# ---- main ------------------------------------------------------------------------------------


def run_mode(args, tree, mode):
    out = args.out
    junit = out / f"{args.backend}-{mode}.xml"
    extra = (["--allow-fallback"] if args.allow_fallback else []) + args.pytest
    run_pytest(tree.parent, args.backend, mode, junit, ["test/op"], extra)
    cases = read_junit(junit)
    failed = sorted({c["nodeid"] for c in cases if c["outcome"] in ("failed", "error")})
    if args.reference and failed:
        reference_junit = out / f"{args.backend}-{mode}-{args.reference}.xml"
        run_pytest(tree.parent, args.reference, mode, reference_junit, failed, args.pytest)
        mark_shared(cases, read_junit(reference_junit))
    return cases


def report(args, results):
    lines = []
    for mode, cases in results.items():
        lines += [
            f"## {args.backend}, dynamic={mode}",
            "",
            summary(args.backend, mode, cases, args.reference),
            "",
            *file_table(cases, args.reference),
            "",
        ]
        if any(c["fallbacks"] for c in cases):
            lines += ["Eager fallbacks in passing tests:", *fallback_table(cases), ""]
    text = "\n".join(lines)
    (args.out / f"{args.backend}-report.md").write_text(text)
    print(text)
    for mode, cases in results.items():
        print(summary(args.backend, mode, cases, args.reference))


def parse(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="new_backendgraph")
    parser.add_argument("--dynamic", choices=("false", "true", "all"), default="all")
    parser.add_argument(
        "--reference",
        default=None,
        help="run each failure again with this backend (aot_eager): failures "
        "it shares are marked as failing for every backend",
    )
    parser.add_argument(
        "--allow-fallback",
        action="store_true",
        help="measure with eager fallback allowed (DICP_STRICT=0)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="default: <DICP_CACHE_DIR>/upstream-tests (holds src/ with op/)",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=MANIFEST,
        help="the files src/ must hold (default: %(default)s)",
    )
    parser.add_argument("pytest", nargs="*", help="after --: options for pytest (-n 2, -k add)")
    args = parser.parse_args(argv)
    args.root = args.root or default_root()
    args.out = args.root / "results"
    return args


def main(argv=None):
    args = parse(argv)
    src = args.root / "src"
    check_sources(src, args.manifest)
    args.out.mkdir(parents=True, exist_ok=True)
    tree = build_tree(src, args.root / f"run-{args.backend}")
    modes = ["false", "true"] if args.dynamic == "all" else [args.dynamic]
    results = {mode: run_mode(args, tree, mode) for mode in modes}
    report(args, results)
    return 1 if own_failures(results) else 0


def own_failures(results):
    """The failures of every mode that the reference backend does not share (all of them when
    no reference ran)."""
    return [
        c
        for cases in results.values()
        for c in cases
        if c["outcome"] in ("failed", "error") and not c.get("shared")
    ]


if __name__ == "__main__":
    sys.exit(main())
