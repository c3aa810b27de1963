"""The OpInfo pass (opinfo.py) as pytest tests, one per OpInfo: emu against the CPU in value,
dtype, device and gradients. The default suite runs the representative SUBSET;
DICP_TEST_EMU_OPINFO=all runs every OpInfo. Each test's ATen ops, native and fallen back, are a
report property (`emu_ops`)."""

import pytest

from dicp import config

from .opinfo import SKIPS, SUBSET, check, opinfos

# OpInfos that fail on emu, with the reason; a listed one that passes fails too (strict).
EXPECTED_FAILURES: dict = {}


def names() -> list:
    chosen = opinfos() if config.test_emu_opinfo == "all" else SUBSET
    return [name for name in chosen if name not in SKIPS]


@pytest.mark.parametrize("name", names())
def test_opinfo_on_emu(name, record_property):
    outcome = check(name)
    record_property("emu_ops", sorted(f"{op} {path} {n}" for (op, path), n in outcome.ops.items()))
    if outcome.status == "skip":
        pytest.skip(outcome.detail)
    if name in EXPECTED_FAILURES:
        assert outcome.status == "fail", f"{name} passes: remove it from EXPECTED_FAILURES"
        pytest.xfail(EXPECTED_FAILURES[name])
    assert outcome.status == "pass", f"{name}: {outcome.detail}"


def test_the_subset_names_opinfos_of_this_torch():
    """A renamed OpInfo would silently leave the subset."""
    assert not [name for name in SUBSET if name not in opinfos()]
