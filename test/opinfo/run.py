"""The full OpInfo conformance run: every op of PyTorch's OpInfo database, every mode.

    python -m test.opinfo.run [--jobs 2] [--out results.jsonl] [--rerun-failed | --again]
                              [--ops 'linalg.*'] [--modes static,grad,dynamic,float64]
                              [--backend emugraph]

Each (op, mode) runs in a worker process (a crash in generated code, or a hang, fails that
case and the run goes on), with DICP_BOUNDS_CHECK=1. Outcomes are appended to `--out` as JSON
lines as they come and never removed: the same command with the same `--out` continues a run that
was stopped (tasks with an outcome are not run again), `--rerun-failed` runs the failed tasks
again after a fix and `--again` every selected one (the latest outcome of a case counts), and
`--summary-only` summarizes a results file again. The run ends with the summary (summary.py); the
exit status is 1 if a case fails that the expected-failure table does not list, or passes while
listed.
"""

import argparse
import fnmatch
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from multiprocessing.connection import wait

from .outcome import Outcome

DEFAULT_TIMEOUT = 1200.0  # seconds per (op, mode): the largest cases build ~170 kernels


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m test.opinfo.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ops",
        nargs="*",
        default=["*"],
        help="fnmatch patterns of OpInfo names (name.variant), run in this order; default all",
    )
    parser.add_argument("--modes", default="static,grad,dynamic,float64")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--out",
        default=None,
        help="results file (JSON lines); default opinfo-results.jsonl in a new temporary folder",
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="run the selected tasks even if --out has their outcomes",
    )
    parser.add_argument(
        "--rerun-failed",
        action="store_true",
        help="run again the (op, mode) tasks whose latest outcome in --out "
        "failed, appending the new outcomes",
    )
    parser.add_argument(
        "--summary-only", action="store_true", help="summarize --out without running anything"
    )
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--seed-base", type=int, default=0)
    parser.add_argument("--fast", action="store_true", help="only the fast subset (fast.py)")
    parser.add_argument(
        "--backend",
        default="new_backendgraph",
        help="a dicp backend; one with a device of its own (emugraph) runs the "
        "samples there, compared with eager on the host",
    )
    return parser.parse_args(argv)


def selected_tasks(args):
    """[(op name, mode)] to run, and the names of every OpInfo selected (skipped ones too)."""
    from .cases import all_opinfos, tasks_for
    from .fast import FAST_OPS

    def first_pattern(name):
        return next((i for i, p in enumerate(args.ops) if fnmatch.fnmatchcase(name, p)), None)

    names = [
        name
        for name in all_opinfos()
        if first_pattern(name) is not None and (not args.fast or name in FAST_OPS)
    ]
    names.sort(key=first_pattern)  # in the order of --ops, then the database's
    modes = args.modes.split(",")
    return [t for name in names for t in tasks_for(name, modes)], names


def main(argv=None):
    args = parse_args(argv)
    if args.out is None:
        args.out = os.path.join(tempfile.mkdtemp(prefix="dicp-opinfo-"), "opinfo-results.jsonl")
    tasks, names = selected_tasks(args)
    start = time.time()
    if not args.summary_only:
        todo = _todo(tasks, args)
        print(
            f"opinfo: {len(todo)} (op, mode) tasks to run of {len(tasks)}, {args.jobs} "
            f"worker(s); results in {args.out}",
            flush=True,
        )
        pool = Pool(args)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops workers
        try:
            pool.run(todo)
        finally:
            pool.stop()
    from .summary import summarize

    wanted = set(tasks)
    outcomes = [o for o in _read(args.out) if (o.op, o.mode) in wanted]
    text, ok = summarize(outcomes, names, seconds=time.time() - start, backend=args.backend)
    print(text, flush=True)
    return 0 if ok else 1


def _read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [Outcome.from_json(line) for line in f if line.strip()]


def _todo(tasks, args):
    from .summary import latest

    previous = latest(_read(args.out))
    if args.again:
        return tasks
    if args.rerun_failed:
        failed = {(o.op, o.mode) for o in previous if o.status == "fail"}
        return [t for t in tasks if t in failed]
    done = {(o.op, o.mode) for o in previous}
    return [t for t in tasks if t not in done]


# ---- workers ------------------------------------------------------------------------------------


def _worker(conn, log_path, seed_base, backend):
    """Run (op, mode) tasks received on `conn`, sending back Outcome JSON lines."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    from .cases import run_task

    while True:
        task = conn.recv()
        if task is None:
            return
        print(f"== {task}", flush=True)
        started = time.time()
        outcomes = run_task(*task, seed_base=seed_base, backend=backend)
        for o in outcomes:
            o.seconds = round(time.time() - started, 2)
        conn.send([o.to_json() for o in outcomes])


class Pool:
    """Worker processes fed one task at a time. A worker is reused for the next task (dynamo
    is reset before every compile); one that dies or overruns the timeout is replaced, and
    its task recorded as a crash or a timeout."""

    def __init__(self, args):
        self.args = args
        self.context = multiprocessing.get_context("spawn")
        self.logs = os.path.dirname(os.path.abspath(args.out))
        self.idle = []  # (connection, process)
        self.busy = {}  # connection -> (process, task, started)
        self.started = 0

    def run(self, tasks):
        os.environ["DICP_BOUNDS_CHECK"] = "1"  # workers inherit it
        pending, total, finished = list(reversed(tasks)), len(tasks), 0
        with open(self.args.out, "a") as out:
            while pending or self.busy:
                while pending and len(self.busy) < self.args.jobs:
                    self._assign(pending.pop())
                for outcomes in self._collect():
                    finished += 1
                    out.writelines(o.to_json() + "\n" for o in outcomes)
                    out.flush()
                    _progress(finished, total, outcomes)

    def stop(self):
        """Every worker ends: idle ones when told, busy ones (a stopped run) killed."""
        for conn, process in self.idle:
            conn.send(None)
            process.join(30)
        for process, _, _ in self.busy.values():
            process.kill()
            process.join()
        self.idle, self.busy = [], {}

    def _assign(self, task):
        conn, process = self.idle.pop() if self.idle else self._spawn()
        conn.send(task)
        self.busy[conn] = (process, task, time.time())

    def _spawn(self):
        parent, child = self.context.Pipe()
        log = os.path.join(self.logs, f"worker-{self.started}.log")
        self.started += 1
        process = self.context.Process(
            target=_worker, daemon=True, args=(child, log, self.args.seed_base, self.args.backend)
        )
        process.start()
        child.close()
        return parent, process

    def _collect(self):
        for conn in wait(list(self.busy), timeout=5.0):
            process, task, _ = self.busy.pop(conn)
            try:
                outcomes = [Outcome.from_json(line) for line in conn.recv()]
                self.idle.append((conn, process))
            except (EOFError, OSError):
                process.join()
                outcomes = _lost(task, "crash", f"worker died (exit status {process.exitcode})")
            yield outcomes
        now = time.time()
        for conn, (process, task, started) in list(self.busy.items()):
            if now - started > self.args.timeout:
                del self.busy[conn]
                process.kill()
                process.join()
                yield _lost(task, "timeout", f"over {self.args.timeout:.0f} s")


def _lost(task, kind, detail):
    from .cases import dtypes_of_task

    op, mode = task
    return [Outcome(op, dtype, mode, "fail", kind, detail) for dtype in dtypes_of_task(op, mode)]


def _progress(finished, total, outcomes):
    if not outcomes:
        return
    first = outcomes[0]
    states = ", ".join(
        f"{o.dtype} {o.status}{' (' + o.kind + ')' if o.kind else ''}" for o in outcomes
    )
    seconds = max(o.seconds for o in outcomes)
    print(f"[{finished}/{total}] {first.op} {first.mode}: {states} ({seconds:.1f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
