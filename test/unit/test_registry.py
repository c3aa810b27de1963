"""The backend registry: a second vendor plugs in without touching shared code."""

import ast
import dataclasses
from pathlib import Path

import pytest
import torch
import torch.fx as fx

import dicp
import dicp.bridge.pipeline.backend as backend_registry
from dicp.bridge.pipeline.stages import infer_node
from dicp.bridge.pipeline.conversion import OpTransformer
from dicp.bridge.pipeline.operator import Operator
from dicp.api import Backend, compile_fx, get_backend, register_backend, registered_backends

from .helpers import BACKEND, cold_cache  # noqa: F401  (fixture)

aten = torch.ops.aten
NAME = "throwaway_xyz"


class VendorAdd(Operator):
    name = "VendorAdd"

    def impl(self, a, b):
        return torch.add(a, b)


class ThrowawayVendor:
    """Everything a vendor writes: a one-row conversion table, a codegen and a compile job."""

    def __init__(self):
        self.converted = []  # ATen nodes the converter saw
        self.graphs = []  # vendor graphs handed to codegen
        self.vendor_add = VendorAdd()
        self.conversions = {aten.add.Tensor: self.convert_add}

    def convert_add(self, ctx, a, b, alpha=1):
        self.converted.append(ctx.node.target)
        return ctx.op(self.vendor_add, a, b)

    def opset_transform(self, gm, ctx):
        return OpTransformer(gm, ctx.backend, lambda n: infer_node(n, ctx.fake_mode)).run()

    def codegen(self, gm, ctx):
        self.graphs.append(gm)
        return gm  # the "source" is the vendor graph itself

    def compile_job(self, gm, ctx):
        def call(args):
            return fx.Interpreter(gm).run(*args)

        return call

    def backend(self):
        return Backend(
            name=NAME,
            opset_transform=self.opset_transform,
            codegen=self.codegen,
            compile_job=self.compile_job,
            conversions=self.conversions,
            conversion_table="test_registry.py",
        )


@pytest.fixture
def vendor():
    vendor = ThrowawayVendor()
    register_backend(vendor.backend())
    yield vendor
    backend_registry._REGISTRY.pop(NAME, None)  # the registry is process-global


def fn(x, y):
    return torch.relu(x + y) * 2


def test_second_backend_compiles_through_shared_bridge(vendor, cold_cache):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    compiled = torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, get_backend(NAME)))
    torch.testing.assert_close(compiled(x, y), fn(x, y), rtol=0, atol=0)
    assert vendor.converted == [aten.add.Tensor]


def test_second_backend_graph_holds_its_vendor_op(vendor, cold_cache):
    x = torch.randn(3)
    torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, get_backend(NAME)))(x, x)
    targets = [n.target for gm in vendor.graphs for n in gm.graph.nodes if n.op == "call_function"]
    assert vendor.vendor_add in targets
    assert aten.add.Tensor not in targets  # converted, not fallen back
    assert aten.relu.default in targets  # no converter: stays ATen (eager fallback)


def test_unknown_backend_raises_key_error_naming_it():
    with pytest.raises(KeyError, match="no_such_backend_abc"):
        get_backend("no_such_backend_abc")


def test_registering_a_different_backend_under_existing_name_raises():
    original = get_backend(BACKEND)
    impostor = dataclasses.replace(original, codegen=lambda gm, ctx: None)
    with pytest.raises(ValueError, match=BACKEND):
        register_backend(impostor)
    assert get_backend(BACKEND) is original
    assert register_backend(original) is original  # re-registering the same spec is fine


def test_registered_backends_lists_throwaway(vendor):
    assert NAME in registered_backends()


def test_shared_code_never_names_a_backend():
    bridge = Path(dicp.__file__).parent / "bridge"
    files = sorted(bridge.rglob("*.py"))
    assert files, "no sources found under dicp/bridge"
    offenders = [str(p) for p in files if "new_backendgraph" in p.read_text().lower()]
    assert offenders == []


def test_debug_dumps_work_for_any_backend(vendor, cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_DEBUG", "1")
    x = torch.randn(3)
    compiled = torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, get_backend(NAME)))
    torch.testing.assert_close(compiled(x, x), fn(x, x))
    (dump,) = (cold_cache / "debug").iterdir()
    assert {"aten_graph.txt", "vendor_graph.txt", "config.txt", "sources.txt"} <= {
        p.name for p in dump.iterdir()
    }
    assert "VendorAdd" in (dump / "sources.txt").read_text()


class MethodVendor(ThrowawayVendor):
    """A compile job returning a bound method that neither sets _boxed_call nor clears args."""

    def compile_job(self, gm, ctx):
        self.gm = gm
        return self.run

    def run(self, args):
        return fx.Interpreter(self.gm).run(*args)


def test_any_callable_from_compile_job_is_wrapped(cold_cache):
    vendor = MethodVendor()
    register_backend(vendor.backend())
    try:
        x, y = torch.randn(4, 5), torch.randn(4, 5)
        compiled = torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, get_backend(NAME)))
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    finally:
        backend_registry._REGISTRY.pop(NAME, None)


def dicp_imports(path: Path) -> list:
    """The dicp modules a source file imports (relative imports stay inside its package)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += (
                [node.module]
                if node.module != "dicp"
                else [f"dicp.{alias.name}" for alias in node.names]
            )
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.split(".")[0] == "dicp"]


BACKEND_SOURCES = [
    Path(dicp.__file__).parent / "vendor",
    Path(dicp.__file__).parent / "tools" / "backend_template",
    Path(dicp.__file__).parent / "tools" / "backend_template_device",
]


@pytest.mark.parametrize("folder", BACKEND_SOURCES, ids=lambda p: p.name)
def test_backends_import_only_the_public_api(folder):
    """The in-tree backends and the scaffold's backend use dicp.api and nothing else of dicp:
    the bridge's modules are free to move."""
    files = sorted(folder.rglob("*.py"))
    assert files, f"no sources found under {folder}"
    offenders = {
        str(p.relative_to(folder)): names
        for p in files
        for names in [[n for n in dicp_imports(p) if n != "dicp.api"]]
        if names
    }
    assert offenders == {}, "import these through dicp.api (add them there if missing)"
