"""torch's private names reach dicp through its isolation modules only: torch_compat.py (the
internals dicp's core and tools use), dynamo_context.py (dynamo's compile-context hooks) and
precompile.py (torch's precompile and AOTAutogradCache)."""

import ast
import sys
from pathlib import Path

import pytest
import torch

import dicp
from dicp.bridge.pipeline import torch_compat

PACKAGE = Path(dicp.__file__).parent
ISOLATION_MODULES = {"torch_compat.py", "dynamo_context.py", "precompile.py"}


def dotted(node):
    """'torch._ops.OpOverload' for an attribute chain rooted at a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_torch_names(source):
    """torch names with a private part that `source`'s code (not its comments or strings) uses;
    ATen ops (torch.ops.aten._softmax) are public."""
    found = []
    for node in ast.walk(ast.parse(source)):
        torch_import = (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "torch"
        )
        if torch_import:
            found += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.Attribute):
            found += [dotted(node) or ""]
    return sorted(
        {
            name
            for name in found
            if name.startswith("torch.")
            and not name.startswith("torch.ops.")
            and any(part.startswith("_") for part in name.split("."))
        }
    )


def test_private_torch_names_only_in_isolation_modules():
    found = {
        str(path.relative_to(PACKAGE.parent)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ISOLATION_MODULES
        for names in [private_torch_names(path.read_text())]
        if names
    }
    assert not found, f"import these through dicp/bridge/pipeline/torch_compat.py: {found}"


def test_the_check_sees_private_names_in_code_only():
    assert private_torch_names("from torch._guards import detect_fake_mode")
    assert private_torch_names("from torch.utils import _pytree as pytree")
    assert private_torch_names("ok = isinstance(t, torch._ops.OpOverload)")
    assert not private_torch_names("y = torch.ops.aten._softmax.default(x, 0, False)")
    assert not private_torch_names(
        "import torch.fx as fx  # see torch._dynamo.reset()\n"
        "msg = 'call torch._dynamo.mark_dynamic'"
    )


def test_compat_names_resolve():
    table = torch_compat.core_aten_decompositions()
    assert len(table) > 100
    assert all(isinstance(op, torch_compat.OpOverload) for op in list(table)[:50])


@pytest.mark.parametrize("fast", [True, False], ids=["inductor's", "torch.empty_strided"])
@pytest.mark.parametrize(
    "sizes, strides, dtype",
    [
        ((1,), (1,), torch.float32),
        ((3, 5), (1, 3), torch.float64),
        ((2, 1, 4), (4, 9, 1), torch.int8),
    ],
)
def test_empty_strided_cpu_makes_the_asked_layout(monkeypatch, fast, sizes, strides, dtype):
    """Both allocators the wrappers may get (the fallback where a release lacks Inductor's)
    give a CPU tensor of the sizes, strides and dtype asked, outside autograd."""
    allocate = torch_compat.empty_strided_cpu
    if not fast:
        monkeypatch.setitem(sys.modules, "torch._C._dynamo.guards", None)  # ImportError
        allocate = torch_compat._fast_empty_strided_cpu()
        assert allocate is not torch_compat.empty_strided_cpu
    tensor = allocate(sizes, strides, dtype)
    assert (tensor.shape, tensor.stride(), tensor.dtype) == (sizes, strides, dtype)
    assert tensor.device.type == "cpu" and not tensor.requires_grad
