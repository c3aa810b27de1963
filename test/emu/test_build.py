"""The native runtime builds for the installed torch, once, and a failure shows why."""

import re
import sys

import pytest
import torch

from dicp.emu import EmuBuildError, _build


def test_a_failed_build_names_the_compiler_message(tmp_path):
    broken = tmp_path / "broken.cpp"
    broken.write_text("int emu_runtime() { return an_undeclared_name; }\n")
    with pytest.raises(EmuBuildError) as error:
        _build._build(tmp_path / "build", [broken])
    message = str(error.value)
    assert f"for torch {torch.__version__} failed in {tmp_path / 'build'}" in message
    assert re.search(r"broken.cpp:1:\d+: error: .an_undeclared_name. was not declared", message)


def test_the_build_is_keyed_by_torch_and_the_sources(monkeypatch):
    key = _build.build_key()
    assert _build.build_dir().name == f"torch-{torch.__version__}-{key}"
    monkeypatch.setattr(_build, "TORCH_VERSION", "2.99.0")
    assert _build.build_key() != key
    monkeypatch.undo()
    monkeypatch.setattr(_build, "FLAGS", ("-O0",))
    assert _build.build_key() != key


def test_a_built_runtime_is_loaded_not_rebuilt():
    built = _build.build_dir() / f"{_build.MODULE}.so"
    assert built.exists()  # the import built it (or an earlier process)
    before = built.stat().st_mtime_ns
    assert _build.load_runtime() is sys.modules[_build.MODULE]
    assert built.stat().st_mtime_ns == before


def test_the_one_unit_includes_every_source():
    """A source left out of all.cpp would not be built (its symbols missing at the import)."""
    included = set(re.findall(r'#include "(\w+\.cpp)"', _build.UNIT.read_text()))
    on_disk = {path.name for path in _build.SOURCES.glob("*.cpp")} - {_build.UNIT.name}
    assert included == on_disk
