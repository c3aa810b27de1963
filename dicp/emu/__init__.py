"""dicp.emu: an emulated accelerator, the device type `emu`, registered through PrivateUse1.

    import dicp.emu
    x = torch.randn(4, device="emu")      # device memory the host cannot read
    torch.emu.synchronize()               # torch.emu is shaped like torch.cuda

It runs on the CPU and shows the half of a vendor's job that host tensors hide: device memory
the host cannot read (reading it without a copy crashes), streams that run asynchronously
(a missing wait gives wrong results), a caching allocator with statistics, a generator per
device, a small set of native ops and a CPU fallback for the rest, with dicp's debugging
knobs on eager ops (eager.py). Nothing happens on a bare `import dicp`: PrivateUse1 belongs to
one backend per process, and a vendor's runtime holds it in theirs; importing dicp.emu where
another backend holds it raises PrivateUse1Taken.

The native runtime (csrc/) builds for the installed torch on first import (_build.py).
"""

import atexit

from dicp import config

from . import torch_compat
from .torch_compat import PrivateUse1Taken

torch_compat.check_free()  # before anything is built or registered

from . import _runtime, debug, eager  # noqa: E402  (the runtime builds here on first use)
from ._build import EmuBuildError  # noqa: E402
from .debug import EagerAutocompareError  # noqa: E402
from .eager import observe_ops  # noqa: E402

_C = _runtime.module()
eager.native = eager.registered(
    _C.register_device(
        eager.to_register(), eager.host_ops(), eager.hidden_writes(), config.emu_isolation
    )
)
eager.fallback_registered = frozenset(_C.fallback_registrations())

from . import device  # noqa: E402

torch_compat.claim(device)
_C.set_policy(eager.policy, debug.dump, debug.compare)
atexit.register(_C.set_policy, None, None, None)  # no Python calls from kernels at exit

__all__ = ["EagerAutocompareError", "EmuBuildError", "PrivateUse1Taken", "device", "observe_ops"]
