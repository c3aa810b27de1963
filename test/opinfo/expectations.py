"""The OpInfo suite's two tables: ops it skips, and cases expected to fail. Each entry says why.

SKIPS: OpInfo name -> reason. Only ops whose result cannot be compared with eager's (random,
uninitialized memory) or that cannot run on the CPU. (Ops declaring no dtype the suite tests on
the CPU, complex-only or CUDA-only ones, are skipped without an entry: see dtypes.py.)

EXPECTED_FAILURES: (op, dtype, mode) -> reason; dtype and mode may be "*". It may only shrink:
an entry leaves when its bug is fixed. Entries are strict: the fast subset and the full run
report a case listed here that passes ("unexpected pass"), so the table cannot keep an entry
that no longer fails.
"""

import fnmatch

_RANDOM = "draws random numbers: compiled code draws other numbers than eager"
_UNINITIALIZED = "returns uninitialized memory: its values are arbitrary in eager and compiled"

SKIPS = {
    **dict.fromkeys(
        [
            "bernoulli",
            "cauchy",
            "exponential",
            "geometric",
            "log_normal",
            "multinomial",
            "normal",
            "normal.in_place",
            "normal.number_mean",
            "uniform",
            "rand_like",
            "randint",
            "randint_like",
            "randn",
            "randn_like",
            "nn.functional.dropout",
            "nn.functional.dropout2d",
            "nn.functional.dropout3d",
            "nn.functional.alpha_dropout",
            "nn.functional.feature_alpha_dropout.with_train",
            "nn.functional.rrelu",
            "nn.functional.fractional_max_pool2d",
            "nn.functional.fractional_max_pool3d",
        ],
        _RANDOM,
    ),
    **dict.fromkeys(
        [
            "empty",
            "empty_like",
            "empty_permuted",
            "empty_strided",
            "new_empty",
            "new_empty_strided",
        ],
        _UNINITIALIZED,
    ),
}

EXPECTED_FAILURES = {
    # Eager's own algorithm, not arithmetic: out of reach of an exact comparison.
    **dict.fromkeys(
        [
            ("nn.functional.interpolate.bilinear", "uint8", "static"),
            ("nn.functional.interpolate.bicubic", "uint8", "static"),
            ("nn.functional.upsample_bilinear", "uint8", "static"),
        ],
        "eager's uint8 bilinear and bicubic CPU kernels interpolate in fixed point; "
        "interpolating in float, as torch's decomposition does, differs from them by 1 in many "
        "elements (Inductor differs from eager in the same 173 of 1014 elements of a "
        "27x27 -> 13x13 bilinear case)",
    ),
}


def skip_reason(op):
    return SKIPS.get(op)


def expected_failure(op, dtype, mode):
    """The reason (op, dtype, mode) is expected to fail, or None."""
    for (name, d, m), reason in EXPECTED_FAILURES.items():
        if name == op and fnmatch.fnmatch(dtype, d) and fnmatch.fnmatch(mode, m):
            return reason
    return None
