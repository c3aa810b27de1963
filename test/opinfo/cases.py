"""The OpInfo database as (op, mode) tasks: which run, with which dtypes, and running one."""

import functools
import logging
import warnings

from .check import BACKEND, MODES, OpCheck, case_name
from .dtypes import case_dtypes
from .expectations import skip_reason
from .outcome import Outcome


@functools.lru_cache(maxsize=None)
def _opinfos():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return {case_name(op): op for op in op_db}


def all_opinfos():
    """Every OpInfo name (`name` or `name.variant`), in the database's order."""
    return list(_opinfos())


def opinfo(name):
    return _opinfos()[name]


def why_skipped(name):
    """Why the whole op is skipped, or None."""
    reason = skip_reason(name)
    if reason is None and not case_dtypes(opinfo(name), "static"):
        reason = "declares no dtype the suite tests on the CPU (complex-only or CUDA-only)"
    return reason


def tasks_for(name, modes=MODES):
    if why_skipped(name) is not None:
        return []
    return [(name, mode) for mode in modes if case_dtypes(opinfo(name), mode)]


def dtypes_of_task(name, mode):
    return [str(d).removeprefix("torch.") for d in case_dtypes(opinfo(name), mode)]


def run_task(name, mode, seed_base=0, backend=BACKEND):
    """Outcomes of one (op, mode), one per dtype; an error of the suite itself (not of the
    backend: those are caught in OpCheck) becomes a failure of kind `harness error`."""
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return OpCheck(opinfo(name), mode, seed_base, backend).run()
        except Exception as error:
            lines = str(error).splitlines()
            detail = f"{type(error).__name__}: {lines[0][:400] if lines else ''}"
            return [
                Outcome(name, dtype, mode, "fail", "harness error", detail)
                for dtype in dtypes_of_task(name, mode)
            ]
