"""The OpInfo pass (opinfo.py) as pytest tests, one per OpInfo: emu against the CPU in value,
dtype, device and gradients. Each test's ATen ops, native and fallen back, are a report
property (`emu_ops`)."""
import pytest

from .opinfo import SKIPS, check, opinfos

# OpInfos that fail on emu, with the reason; a listed one that passes fails too (strict).
EXPECTED_FAILURES = {}

NAMES = [name for name in opinfos() if name not in SKIPS]


@pytest.mark.parametrize("name", NAMES)
def test_opinfo_on_emu(name, record_property):
    outcome = check(name)
    record_property("emu_ops", sorted(f"{op} {path} {n}" for (op, path), n in outcome.ops.items()))
    if outcome.status == "skip":
        pytest.skip(outcome.detail)
    if name in EXPECTED_FAILURES:
        assert outcome.status == "fail", f"{name} passes: remove it from EXPECTED_FAILURES"
        pytest.xfail(EXPECTED_FAILURES[name])
    assert outcome.status == "pass", f"{name}: {outcome.detail}"
