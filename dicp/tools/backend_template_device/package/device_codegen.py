"""BACKEND_NAME's codegen on its device: the host template's (codegen.py), with its buffers
allocated on the device and each kernel call a launch on the device's stream (device.py)."""

from . import codegen as host
from . import device


class Codegen(host.Codegen):
    def __init__(self, gm, ctx):
        super().__init__(gm, ctx)
        self.wrapper.device = device.DEVICE  # buffers on the device
        self.wrapper.renderer = device.LaunchRenderer  # kernel calls as launches


def codegen(gm, ctx):
    return Codegen(gm, ctx).run()
