"""The torch internals dicp.emu relies on, in one place: claiming PrivateUse1 for `emu`.

Only one runtime can hold PrivateUse1 in a process, and a vendor's own (DIPU, torch_npu)
holds it in theirs, so dicp claims it only on `import dicp.emu` and refuses when another
backend already has it. torch offers public calls to rename the key and generate the tensor
methods, but none to read who holds it, and registers the device module (torch.emu) with
`torch._register_device_module`, the call every PrivateUse1 runtime uses.
"""

import torch

# The release, for the runtime's build key.
TORCH_VERSION = torch.__version__

NAME = "emu"
UNCLAIMED = "privateuseone"


class PrivateUse1Taken(RuntimeError):
    """PrivateUse1 already belongs to another backend; `.holder` is its name."""

    def __init__(self, holder: str):
        super().__init__(
            f"dicp.emu cannot register the emulated device: PrivateUse1 is already taken by the "
            f"'{holder}' backend (torch.utils.rename_privateuse1_backend('{holder}') ran in this "
            f"process). Only one backend can hold PrivateUse1: use '{holder}' here, or import "
            f"dicp.emu in a process without it."
        )
        self.holder = holder


def holder() -> str | None:
    """The backend holding PrivateUse1, or None. torch has no public reader of the name;
    torch.utils.backend_registration itself uses this one."""
    name = torch._C._get_privateuse1_backend_name()
    return None if name == UNCLAIMED else name


def check_free() -> None:
    taken = holder()
    if taken is not None:
        raise PrivateUse1Taken(taken)


def claim(device_module) -> None:
    """Name PrivateUse1 `emu`, make `device_module` torch.emu and add Tensor.emu() etc."""
    torch.utils.rename_privateuse1_backend(NAME)
    torch._register_device_module(NAME, device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)


def has_kernel(qualified: str, key: str) -> bool:
    """Whether op `qualified` ("aten::add.Tensor") has a kernel of its own for dispatch key
    `key`: torch has no public query, and eager.path names the kernel an op will run."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
