"""The CPU fallback: ops without a device kernel run on the host, aliasing kept, logged once."""

import logging

import pytest
import torch

import dicp.emu
from dicp.emu import eager, observe_ops


def on_both(make):
    """`make(device)` on the CPU and on emu, the emu result brought back to the host."""
    emu = make("emu")
    return make("cpu"), emu.cpu() if isinstance(emu, torch.Tensor) else emu


def test_an_op_without_a_kernel_falls_back_and_matches_the_cpu():
    x = torch.randn(5, 7)
    with observe_ops() as seen:
        got = torch.special.erfcx(x.to("emu"))
    assert seen["aten.special_erfcx.default", "fallback"] == 1
    assert got.device.type == "emu"
    assert torch.allclose(got.cpu(), torch.special.erfcx(x))


def test_an_in_place_fallback_through_a_view_writes_its_base():
    def run(device):
        base = torch.arange(12.0, device=device).reshape(3, 4)
        base[1:, ::2].cumsum_(0)  # cumsum_ has no emu kernel
        return base

    cpu, emu = on_both(run)
    assert torch.equal(cpu, emu)


def test_inputs_sharing_storage_keep_sharing_it():
    """Both inputs are views of one storage; the host copy keeps them one storage, so the
    op sees the overlap and refuses it as it does on the CPU (per-tensor copies would not)."""
    for device in ("cpu", "emu"):
        base = torch.arange(8.0, device=device)
        with pytest.raises(RuntimeError, match="single memory location"):
            base[1:].addcmul_(base[:-1], base[:-1])


def test_an_out_argument_is_resized_and_written():
    x = torch.arange(6.0)
    out = torch.empty(0, device="emu")
    result = torch.cumsum(x.to("emu"), 0, out=out)
    assert result is out and out.shape == (6,)
    assert torch.equal(out.cpu(), torch.cumsum(x, 0))


def test_a_fallen_back_view_op_returns_a_view_of_device_memory(view_op):
    base = torch.arange(6.0, device="emu")
    every_other = view_op(base)  # the op ran on the host, on a host copy
    assert every_other.device.type == "emu"
    assert every_other.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    base.mul_(10)
    assert torch.equal(every_other.cpu(), torch.tensor([0.0, 20.0, 40.0]))


@pytest.fixture(scope="module")
def view_op():
    """A custom op returning a view of its input, with a CPU kernel only: it reaches emu
    through the fallback (aten's own view ops are native)."""
    library = torch.library.Library("dicp_emu_test", "DEF")
    library.define("every_other(Tensor(a) x) -> Tensor(a)")
    library.impl("every_other", lambda x: x[::2], "CPU")
    yield torch.ops.dicp_emu_test.every_other
    library._destroy()


def test_a_fallback_is_logged_once_per_op(caplog, monkeypatch):
    monkeypatch.setattr(eager, "_logged", set())
    x = torch.randn(4, device="emu")
    with caplog.at_level(logging.INFO, logger="dicp.emu"):
        torch.special.erfcx(x)
        torch.special.erfcx(x)
        torch.atan(x)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("aten.special_erfcx.default runs on the CPU" in line for line in lines) == 1
    assert sum("aten.atan.default runs on the CPU" in line for line in lines) == 1


def test_a_native_op_is_not_logged(caplog, monkeypatch):
    monkeypatch.setattr(eager, "_logged", set())
    with caplog.at_level(logging.INFO, logger="dicp.emu"):
        torch.ones(3, device="emu") * 2
    assert not [r for r in caplog.records if "runs on the CPU" in r.getMessage()]


@pytest.mark.parametrize("op", [torch.add, torch.atan2], ids=["native", "fallback"])
def test_a_host_tensor_among_device_tensors_is_an_error(op):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        op(torch.ones(2, 3, device="emu"), torch.ones(2, 3))


def test_a_host_scalar_tensor_among_device_tensors_is_allowed():
    got = torch.atan2(torch.ones(3, device="emu"), torch.tensor(2.0))
    assert torch.allclose(got.cpu(), torch.atan2(torch.ones(3), torch.tensor(2.0)))


def test_what_registration_made_native():
    assert "aten.add.Tensor" in dicp.emu.eager.native
    assert "aten.cumsum.default" not in dicp.emu.eager.native


# (op, a call of it on emu tensors): native, structured ops with the fallback as their own
# kernel, an op the backend fallback serves, a whole-op host fallback (eager.HOST_OPS)
PATHS = {
    "aten.add.Tensor": lambda x: torch.ops.aten.add.Tensor(x, x),
    "aten.cumsum.default": lambda x: torch.ops.aten.cumsum.default(x, 0),
    "aten.special_erfcx.default": lambda x: torch.ops.aten.special_erfcx.default(x),
    "aten.nonzero.default": lambda x: torch.ops.aten.nonzero.default(x),
    "aten.convolution.default": lambda x: torch.ops.aten.convolution.default(
        x.view(1, 1, -1), x.view(1, 1, -1)[..., :2], None, [1], [0], [1], False, [0], 1
    ),
}


@pytest.mark.parametrize("forced", [False, True], ids=["as_registered", "forced"])
@pytest.mark.parametrize("op", PATHS)
def test_path_says_which_kernel_an_op_will_run(op, forced, monkeypatch):
    """What `eager.path` predicts (emugraph's debug dump prints it) is what a call does."""
    if forced:
        monkeypatch.setenv("DICP_FALLBACK_OPS", op)
    with observe_ops() as seen:
        PATHS[op](torch.randn(6, device="emu"))
    assert seen[op, eager.path(op)] == 1


def test_path_of_structural_and_composite_ops():
    assert eager.path("aten.view.default") == "native"  # the device's memory model
    assert eager.path("aten.linear.default") == "composite"  # addmm, native, inside


def test_a_profile_shows_the_fallbacks_copies():
    x = torch.randn(5, device="emu")
    with torch.profiler.profile() as profile:
        torch.cumsum(x, 0)
        torch.emu.synchronize()
    names = [event.name for event in profile.events()]
    assert [n for n in names if n.startswith("dicp.emu fallback")] == [
        "dicp.emu fallback aten::cumsum: copy emu:0 -> cpu",
        "dicp.emu fallback aten::cumsum: on the CPU",
        "dicp.emu fallback aten::cumsum: copy cpu -> emu:0",
    ]


# ---- arguments an op writes without its schema saying so (eager.HIDDEN_WRITES) ----


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5, 5)], ids=["BatchNorm1d", "BatchNorm2d"])
def test_batch_norm_training_updates_the_running_statistics(shape, momentum):
    """native_batch_norm writes its running statistics; its schema does not say so."""

    def run(device):
        torch.manual_seed(0)
        norm = (torch.nn.BatchNorm1d if len(shape) == 2 else torch.nn.BatchNorm2d)(
            shape[1], momentum=momentum
        ).to(device)
        for step in range(3):
            norm(torch.randn(shape).add(step).to(device))
        return {name: value.cpu() for name, value in norm.state_dict().items()}

    cpu, emu = run("cpu"), run("emu")
    assert cpu["num_batches_tracked"] == emu["num_batches_tracked"] == 3
    for name in ("running_mean", "running_var"):
        assert torch.allclose(emu[name], cpu[name], atol=1e-6), name


def test_batch_norm_update_stats_updates_the_running_statistics():
    def run(device):
        x = torch.arange(12.0).reshape(4, 3).to(device)
        stats = torch.zeros(3, device=device), torch.ones(3, device=device)
        torch.ops.aten.batch_norm_update_stats(x, *stats, 0.5)
        return torch.stack(stats)

    cpu, emu = on_both(run)
    assert torch.allclose(emu, cpu)


def test_every_hidden_write_torch_knows_of_is_copied_back():
    """torch's SchemaInfo knows which arguments ops write beyond their schemas; those of ops
    with a CPU kernel (the fallback's) must be in eager.HIDDEN_WRITES."""
    from torch._C import _SchemaArgType, _SchemaArgument, _SchemaInfo

    missing = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::") or not torch._C._dispatch_has_kernel_for_dispatch_key(
            qualified, "CPU"
        ):
            continue
        name, _, overload = qualified.removeprefix("aten::").partition(".")
        op = f"aten.{name}.{overload or 'default'}"
        schema = getattr(getattr(torch.ops.aten, name), overload or "default")._schema
        info = _SchemaInfo(schema)
        for i, argument in enumerate(schema.arguments):
            written = argument.alias_info is not None and argument.alias_info.is_write
            if (
                not written
                and info.is_mutable(_SchemaArgument(_SchemaArgType.input, i))
                and argument.name not in eager.HIDDEN_WRITES.get(op, ())
            ):
                missing.append(f"{op}: {argument.name}")
    assert not missing
