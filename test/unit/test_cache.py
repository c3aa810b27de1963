"""The on-disk build cache: key, build-once, atomic writes, corruption, compile errors.

Each kernel source carries a unique marker: the in-process library cache is keyed by the
build key and cache directory, so two tests must never share a source.
"""

import ctypes
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import uuid

import pytest

import dicp
from dicp.bridge.cache.build import (
    BuildSpec,
    CompileError,
    Toolchain,
    atomic_write,
    cache_stats,
    load_artifact,
)
from dicp.vendor.new_backendGraph.compile_job import BASE_FLAGS

from .helpers import REPO, check_fresh, cold_cache  # noqa: F401  (fixture)

KERNEL = """// {marker}
extern "C" long long dicp_unit_axpb(long long a, long long x, long long b) {{
    return a * x + b;
}}
"""
BROKEN = """// {marker}
extern "C" long long dicp_unit_broken(long long a) {{
    return a +* ;
}}
"""

# A fresh interpreter loads the spec stored in SPEC_FILE and reports its cache counters.
LOAD_SCRIPT = """
import ctypes, json, os
from dicp.bridge.cache.build import BuildSpec, Toolchain, cache_stats, load_artifact
raw = json.load(open(os.environ["SPEC_FILE"]))
spec = BuildSpec(raw["source"], Toolchain(tuple(raw["command"]), key=tuple(raw["key"])))
fn = load_artifact(spec).dicp_unit_axpb
fn.argtypes = [ctypes.c_longlong] * 3
fn.restype = ctypes.c_longlong
print(json.dumps({"value": fn(6, 7, 5), **cache_stats()}))
"""


def gxx(compiler="g++", flags=BASE_FLAGS, variant="generic", header="// header v1\n"):
    return Toolchain(
        (compiler, *flags, "{source}", "-o", "{artifact}"), key=(variant, "unit.h", header)
    )


def make_spec(template=KERNEL):
    return BuildSpec(template.format(marker=uuid.uuid4().hex), gxx())


def axpb(library):
    fn = library.dicp_unit_axpb
    fn.argtypes = [ctypes.c_longlong] * 3
    fn.restype = ctypes.c_longlong
    return fn


def entry(cache, spec):
    key = spec.key()
    directory = cache / "kernels" / key[:2]
    return {suffix: directory / f"{key}{suffix}" for suffix in (".so", ".sha256", ".cpp")}


def delta(before, after):
    return {name: after[name] - before[name] for name in after}


def spec_file(tmp_path, spec):
    path = tmp_path / "spec.json"
    path.write_text(
        json.dumps(
            {"source": spec.source, "command": spec.toolchain.command, "key": spec.toolchain.key}
        )
    )
    return str(path)


def load_fresh(tmp_path, spec, cache):
    return json.loads(check_fresh(LOAD_SCRIPT, cache, SPEC_FILE=spec_file(tmp_path, spec)))


# ---- key -----------------------------------------------------------------------------

CHANGES = {
    "source": {"source": KERNEL.format(marker="other")},
    "compiler": {"toolchain": gxx(compiler="clang++")},
    "flags": {"toolchain": gxx(flags=BASE_FLAGS + ("-DEXTRA",))},
    "chip_variant": {"toolchain": gxx(variant="x86-64-v3")},
    "header_text": {"toolchain": gxx(header="// header v2\n")},
    "artifact_suffix": {"toolchain": dataclasses.replace(gxx(), artifact_suffix=".dylib")},
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_key_changes_with_each_input(field):
    spec = make_spec()
    assert dataclasses.replace(spec, **CHANGES[field]).key() != spec.key()


def test_key_is_deterministic():
    spec = make_spec()
    assert dataclasses.replace(spec).key() == spec.key()


def test_key_changes_with_dicp_version(monkeypatch):
    spec = make_spec()
    before = spec.key()
    monkeypatch.setattr(dicp, "__version__", dicp.__version__ + ".post1")
    assert spec.key() != before


# ---- build once, hit after -------------------------------------------------------------


def test_builds_once_then_memory_then_disk_hit(cold_cache, tmp_path):
    spec = make_spec()
    before = cache_stats()
    assert axpb(load_artifact(spec))(3, 4, 5) == 17
    assert delta(before, cache_stats())["builds"] == 1
    files = entry(cold_cache, spec)
    assert all(path.exists() for path in files.values()), files
    assert (
        files[".sha256"].read_text().strip()
        == hashlib.sha256(files[".so"].read_bytes()).hexdigest()
    )
    assert files[".cpp"].read_text() == spec.source

    again = cache_stats()
    load_artifact(spec)
    assert delta(again, cache_stats()) == {
        "builds": 0,
        "disk_hits": 0,
        "memory_hits": 1,
        "rebuilt_corrupt": 0,
    }

    fresh = load_fresh(tmp_path, spec, cold_cache)
    assert fresh == {
        "value": 47,
        "builds": 0,
        "disk_hits": 1,
        "memory_hits": 0,
        "rebuilt_corrupt": 0,
    }


def test_a_library_loaded_from_one_cache_is_built_into_another(cold_cache, tmp_path, monkeypatch):
    """The in-process tier is per cache directory: a process that switches DICP_CACHE_DIR
    (a test's own cold cache, a job with a second cache) still fills the new one, whose
    entries (graphs, AOT results) refer to their kernels in it. When the key no longer held
    a path of the cache directory (the precompiled header's), a memory hit left the second
    cache without the kernel."""
    spec = make_spec()
    load_artifact(spec)
    other = tmp_path / "other-cache"
    monkeypatch.setenv("DICP_CACHE_DIR", str(other))
    before = cache_stats()
    assert axpb(load_artifact(spec))(3, 4, 5) == 17
    assert delta(before, cache_stats())["builds"] == 1
    assert all(path.exists() for path in entry(other, spec).values())


def test_cache_root_layout_follows_dicp_cache_dir(cold_cache):
    spec = make_spec()
    load_artifact(spec)
    key = spec.key()
    assert sorted(p.name for p in (cold_cache / "kernels" / key[:2]).iterdir()) == sorted(
        f"{key}{suffix}" for suffix in (".cpp", ".sha256", ".so")
    )  # no temp files left


# ---- atomic writes ---------------------------------------------------------------------


def test_atomic_write_writes_and_replaces_without_temp_files(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write(target, b"first")
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["file.bin"]


def test_atomic_write_failure_keeps_old_file_and_no_temp(tmp_path):
    target = tmp_path / "file.bin"
    atomic_write(target, b"old")
    with pytest.raises(TypeError):
        atomic_write(target, "not bytes")  # fails inside the write
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


# ---- corruption ------------------------------------------------------------------------


def _garble_so(files):
    files[".so"].write_bytes(b"\x7fELF garbage, not a library" * 10)


def _change_digest(files):
    files[".sha256"].write_text("0" * 64)


def _truncate_so(files):
    data = files[".so"].read_bytes()
    files[".so"].write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "corrupt",
    [_garble_so, _change_digest, _truncate_so],
    ids=["garbage_so", "wrong_sha256", "truncated_so"],
)
def test_corrupt_entry_is_rebuilt_not_trusted(cold_cache, tmp_path, corrupt):
    spec = make_spec()
    load_artifact(spec)
    files = entry(cold_cache, spec)
    corrupt(files)
    fresh = load_fresh(tmp_path, spec, cold_cache)
    assert fresh["value"] == 47
    assert (fresh["builds"], fresh["rebuilt_corrupt"], fresh["disk_hits"]) == (1, 1, 0)
    assert (
        files[".sha256"].read_text().strip()
        == hashlib.sha256(files[".so"].read_bytes()).hexdigest()
    )


def test_concurrent_processes_share_one_cold_entry(cold_cache, tmp_path):
    """Four 'ranks' compile the same kernel at once: all succeed and the entry is valid."""
    spec = make_spec()
    env_file = spec_file(tmp_path, spec)
    env = {**os.environ, "DICP_CACHE_DIR": str(cold_cache), "SPEC_FILE": env_file}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD_SCRIPT],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [rank.communicate(timeout=120) + (rank.returncode,) for rank in ranks]
    for out, err, code in results:
        assert code == 0, err
        assert json.loads(out)["value"] == 47
    files = entry(cold_cache, spec)
    assert (
        files[".sha256"].read_text().strip()
        == hashlib.sha256(files[".so"].read_bytes()).hexdigest()
    )
    leftovers = [p.name for p in files[".so"].parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


# ---- compile errors --------------------------------------------------------------------


def test_build_error_shows_compiler_message_and_source_path(cold_cache):
    spec = make_spec(BROKEN)
    before = cache_stats()
    with pytest.raises(CompileError) as info:
        load_artifact(spec)
    message = str(info.value)
    source = entry(cold_cache, spec)[".cpp"]
    assert str(source) in message
    assert source.read_text() == spec.source
    assert "error" in message and "dicp_unit_broken" in message  # g++'s own diagnostic
    assert delta(before, cache_stats())["builds"] == 0
    assert not entry(cold_cache, spec)[".so"].exists()
    assert [p.name for p in source.parent.iterdir()] == [source.name]  # no temp .so left


# ---- any toolchain -------------------------------------------------------------------------


def shout_toolchain():
    """A toolchain with nothing of C++: `cp` builds, reading the file in upper case loads."""
    return Toolchain(
        ("cp", "{source}", "{artifact}"),
        source_suffix=".txt",
        artifact_suffix=".out",
        load=lambda path: open(path).read().upper(),
    )


def test_cache_serves_any_toolchain(cold_cache):
    spec = BuildSpec(f"hello {uuid.uuid4().hex}", shout_toolchain())
    before = cache_stats()
    assert load_artifact(spec) == spec.source.upper()
    assert delta(before, cache_stats())["builds"] == 1
    key = spec.key()
    assert sorted(p.name for p in (cold_cache / "kernels" / key[:2]).iterdir()) == sorted(
        f"{key}{suffix}" for suffix in (".txt", ".sha256", ".out")
    )


def test_corrupt_entry_of_any_toolchain_is_rebuilt(cold_cache, monkeypatch):
    spec = BuildSpec(f"hello {uuid.uuid4().hex}", shout_toolchain())
    load_artifact(spec)
    key = spec.key()
    (cold_cache / "kernels" / key[:2] / f"{key}.out").write_text("tampered")
    monkeypatch.setattr("dicp.bridge.cache.build._LOADED", {})  # as a new process would
    before = cache_stats()
    assert load_artifact(spec) == spec.source.upper()
    assert delta(before, cache_stats())["rebuilt_corrupt"] == 1
