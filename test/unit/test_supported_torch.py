"""The supported torch range: what pip keeps, and the warning at `import dicp` outside it.

The pip checks run the real pip resolver on dicp's torch requirement in a throwaway virtualenv
whose "installed torch" is a metadata-only distribution with a vendor-style version, next to a
newer in-range release offered on a local index. pip decides from metadata alone, so this is
the decision it takes for a real build with that version. (test/scripts/torch_versions.sh checks
the same with real torch releases: `pip install -e '.[test]'` must not change their torch.)
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dicp.supported_torch import (
    TESTED_RELEASES,
    TORCH_REQUIREMENT,
    TORCH_SPECIFIER,
    untested_torch_message,
)

from .helpers import check_fresh, cold_cache  # noqa: F401  (fixture)

SUPPORTED = [
    "2.11.0",
    "2.11.0a0+gitc263bd4",
    "2.11.0rc1",
    "2.13.0+cpu",
    "2.13.0a0+gitc263bd4",
    "2.15.0",
    "2.15.0+cu132",
    "2.15.2",
]
UNSUPPORTED = [
    "2.10.0",
    "2.10.1+gitabc",
    "2.11.0.dev20260101",
    "2.16.0a0+gitc263bd4",
    "2.16.0",
    "3.0.0",
]
OFFERED = "2.15.0"  # the newer release the local index offers pip


@pytest.mark.parametrize("version", SUPPORTED)
def test_supported_versions_need_no_warning(version):
    assert untested_torch_message(version) is None


@pytest.mark.parametrize("version", UNSUPPORTED)
def test_message_names_the_range_and_the_version(version):
    message = untested_torch_message(version)
    assert TESTED_RELEASES in message and TORCH_SPECIFIER in message and version in message


def metadata_text(version):
    return f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"


def offer_wheel(index, version):
    """A metadata-only torch wheel in a find-links folder."""
    index.mkdir(exist_ok=True)
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(index / f"torch-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{info}/METADATA", metadata_text(version))
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: dicp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")


def venv_with_torch(root, version):
    """A virtualenv (no pip) whose site-packages holds torch `version`'s metadata."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    )
    info = Path(purelib.strip()) / f"torch-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata_text(version))
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")
    return python


def pip_would_install(tmp_path, installed):
    """What `pip install TORCH_REQUIREMENT` would install over torch `installed`, offered
    OFFERED on a local index, with the machine's pip configuration (indexes, find-links) off."""
    python = venv_with_torch(tmp_path / "venv", installed)
    offer_wheel(tmp_path / "index", OFFERED)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--dry-run",
            "--no-index",
            "--find-links",
            str(tmp_path / "index"),
            "--quiet",
            "--report",
            str(report),
            TORCH_REQUIREMENT,
        ],
        check=True,
        env={**env, "PIP_CONFIG_FILE": os.devnull},
    )
    return [
        (item["metadata"]["name"], item["metadata"]["version"])
        for item in json.loads(report.read_text())["install"]
    ]


@pytest.mark.parametrize(
    "installed", ["2.11.0a0+gitc263bd4", "2.13.0a0+gitc263bd4", "2.11.0", "2.15.0+cu132"]
)
def test_pip_keeps_an_installed_torch_in_the_range(tmp_path, installed):
    assert pip_would_install(tmp_path, installed) == []


@pytest.mark.parametrize("installed", ["2.10.0", "2.16.0a0+gitc263bd4"])
def test_pip_replaces_a_torch_outside_the_range(tmp_path, installed):
    assert pip_would_install(tmp_path, installed) == [("torch", OFFERED)]


def test_import_dicp_warns_once_outside_the_range(tmp_path, cold_cache):
    """A fresh interpreter whose torch metadata says 2.16.0a0: `import dicp` succeeds with one
    UntestedTorchWarning naming the range; a second import adds none."""
    fake = tmp_path / "meta"
    (fake / "torch-2.16.0a0+gitc263bd4.dist-info").mkdir(parents=True)
    (fake / "torch-2.16.0a0+gitc263bd4.dist-info" / "METADATA").write_text(
        metadata_text("2.16.0a0+gitc263bd4")
    )
    caught = json.loads(
        check_fresh(
            f"""
        import json, sys, warnings
        sys.path.insert(0, {str(fake)!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import dicp
            import dicp.vendor
        print(json.dumps([[w.category.__name__, w.filename, str(w.message)] for w in caught]))
    """,
            cold_cache,
        )
    )
    assert len(caught) == 1
    category, filename, message = caught[0]
    assert category == "UntestedTorchWarning"
    assert filename == "<string>", "the warning should point at the importing line"
    assert "2.16.0a0+gitc263bd4" in message and TESTED_RELEASES in message


def test_import_dicp_is_silent_under_the_running_torch(cold_cache):
    """The torch this suite runs under is a supported one (else the suite's claim is void)."""
    assert (
        check_fresh(
            """
        import warnings
        warnings.simplefilter("error")
        import dicp
        print("ok")
    """,
            cold_cache,
        )
        == "ok"
    )
