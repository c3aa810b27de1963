"""dicp.config: precedence (patch > environment > code > default), validation, the unknown-
variable warning, backend-declared knobs, the command line and the knob table (docs/knobs.md)."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from dicp import config
import dicp.vendor.new_backendGraph  # (declares the backend's knobs)
import dicp.vendor.emugraph  # noqa: F401  (declares its knobs; loads the emu runtime)

from .helpers import REPO, compiled


@pytest.fixture
def clean(monkeypatch):
    """No DICP_* variable and no code value for the duration of the test."""
    for knob in config.knobs():
        monkeypatch.delenv(knob.env, raising=False)
    saved = dict(config._CODE)
    config._CODE.clear()
    yield
    config._CODE.clear()
    config._CODE.update(saved)


def test_default_code_environment_patch_precedence(clean, monkeypatch):
    assert (config.strict, config.source("strict")) == (False, "default")
    config.strict = True
    assert (config.strict, config.source("strict")) == (True, "code")
    monkeypatch.setenv("DICP_STRICT", "off")
    assert (config.strict, config.source("strict")) == (False, "environment")
    with config.patch(strict=True):
        assert (config.strict, config.source("strict")) == (True, "patch")
        with config.patch({"strict": False}):
            assert config.strict is False
        assert config.strict is True
    assert (config.strict, config.source("strict")) == (False, "environment")
    monkeypatch.delenv("DICP_STRICT")
    del config.strict
    assert config.source("strict") == "default"


def test_patch_restores_after_an_exception_and_works_as_decorator(clean):
    with pytest.raises(RuntimeError):
        with config.patch(fallback_ops="aten.mm.*"):
            raise RuntimeError("boom")
    assert config.fallback_ops == ()

    @config.patch(fallback_ops=["aten.mm.*", "aten.bmm.*"])
    def inside():
        return config.fallback_ops

    assert inside() == ("aten.mm.*", "aten.bmm.*")
    assert config.fallback_ops == ()


@pytest.mark.parametrize(
    "text,value",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("Off", False),
    ],
)
def test_boolean_spellings(clean, monkeypatch, text, value):
    monkeypatch.setenv("DICP_DEBUG", text)
    assert config.debug is value


def test_bad_values_name_the_knob_and_what_it_accepts(clean, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "maybe")
    with pytest.raises(config.ConfigError, match=r"DICP_STRICT='maybe'.*1/true/yes/on"):
        config.strict
    with pytest.raises(config.ConfigError, match="dicp.config.debug = 2"):
        config.debug = 2
    with pytest.raises(config.ConfigError, match="new_backendgraph_target.*cpp"):
        with config.patch(new_backendgraph_target="fortran"):
            pass
    with pytest.raises(AttributeError, match=r"did you mean strict\?"):
        config.strcit = True
    with pytest.raises(AttributeError, match=r"did you mean debug\?"):
        config.debg


def test_values_are_typed(clean, monkeypatch):
    monkeypatch.setenv("DICP_FALLBACK_OPS", " aten.mm.* , ,aten.gelu.default")
    monkeypatch.setenv("DICP_CACHE_DIR", "~/somewhere")
    assert config.fallback_ops == ("aten.mm.*", "aten.gelu.default")
    assert config.cache_dir == Path("~/somewhere").expanduser()


def test_computed_default_follows_xdg_cache_home(clean, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert config.cache_dir == tmp_path / "dicp"


def test_unknown_variable_warns_once_naming_the_nearest_knob(clean, monkeypatch):
    monkeypatch.setenv("DICP_STRCT", "1")
    monkeypatch.setattr(config, "_WARNED", set())
    with pytest.warns(UserWarning, match="DICP_STRCT is not a dicp knob.*DICP_STRICT"):
        config.check_environment()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config.check_environment() == []  # once only


def test_unknown_variable_warns_at_compile(clean, monkeypatch, tmp_path):
    monkeypatch.setenv("DICP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DICP_FALLBACK_OP", "aten.mm.*")
    monkeypatch.setattr(config, "_WARNED", set())
    import torch

    with pytest.warns(UserWarning, match="DICP_FALLBACK_OP is not.*DICP_FALLBACK_OPS"):
        compiled(lambda x: x + 1)(torch.ones(3))


def test_a_backend_declares_its_own_knobs(clean, monkeypatch):
    knob = config.declare(
        "demo_vendor_level", config.Integer(0, 3), 1, "a vendor's knob", owner="demo_vendor"
    )
    try:
        assert config.demo_vendor_level == 1
        monkeypatch.setenv("DICP_DEMO_VENDOR_LEVEL", "3")
        assert config.demo_vendor_level == 3
        monkeypatch.setenv("DICP_DEMO_VENDOR_LEVEL", "4")
        with pytest.raises(config.ConfigError, match="<= 3"):
            config.demo_vendor_level
        assert config.check_environment({"DICP_DEMO_VENDOR_LEVEL": "3"}) == []
        # the same declaration again is fine (a module imported twice), another one is not
        config.declare(
            "demo_vendor_level", config.Integer(0, 3), 1, "a vendor's knob", owner="demo_vendor"
        )
        with pytest.raises(config.ConfigError, match="already declared by demo_vendor"):
            config.declare("demo_vendor_level", config.Flag(), False, "other", owner="other")
        with pytest.raises(config.ConfigError, match="names something"):
            config.declare("patch", config.Flag(), False, "shadows the API")
    finally:
        config._KNOBS.pop(knob.name)


def test_vendor_knobs_are_declared_by_the_backend():
    owners = {k.env: k.owner for k in config.knobs()}
    for env in ("DICP_NEW_BACKENDGRAPH_TARGET", "DICP_CHIP_VARIANT", "DICP_CXX"):
        assert owners[env] == "new_backendgraph"


def _run_cli(*args, **env):
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("DICP_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "dicp.config", *args],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_command_line_prints_values_and_sources():
    result = _run_cli(DICP_STRICT="yes", DICP_CHIP_VARIANT="x86-64-v3", DICP_STRCT="1")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[1:]}
    assert rows["DICP_STRICT"][:2] == ["1", "environment"]
    assert rows["DICP_DEBUG"][:2] == ["0", "default"]
    assert rows["DICP_CHIP_VARIANT"] == ["x86-64-v3", "environment", "new_backendgraph"]
    assert "DICP_STRCT is not a dicp knob (did you mean DICP_STRICT?)" in result.stderr


def test_docs_knob_table_matches_the_declarations():
    page = (REPO / "docs" / "knobs.md").read_text()
    start = page.index("<!-- knob table")
    start = page.index("\n", start) + 1
    end = page.index("<!-- end of knob table -->")
    assert page[start:end].strip() == config.markdown_table(), (
        "docs/knobs.md knob table is out of date: paste `python -m dicp.config --markdown` into it"
    )


def test_debug_dump_records_the_effective_config(monkeypatch, tmp_path):
    import torch

    monkeypatch.setenv("DICP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DICP_DEBUG", "1")
    compiled(lambda x: x * 3)(torch.ones(4))
    dumps = list((tmp_path / "debug").glob("*/config.txt"))
    assert dumps, "no config.txt in the debug dump folder"
    text = dumps[0].read_text()
    rows = {line.split()[0]: line.split()[1:3] for line in text.splitlines()[1:]}
    assert rows["DICP_DEBUG"] == ["1", "environment"]
    assert rows["DICP_CACHE_DIR"] == [str(tmp_path), "environment"]
