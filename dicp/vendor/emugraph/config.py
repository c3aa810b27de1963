"""Knobs of emugraph (declared in dicp.config)."""

from dicp.api import config as dicp_config

OWNER = "emugraph"
dicp_config.declare(
    "emugraph_strict_device",
    dicp_config.Flag(),
    False,
    "fail the compile of an emugraph graph that would hold a host tensor the "
    "program did not ask for (an allocation on the CPU, a host intermediate "
    "without an explicit `device=`), naming the node",
    owner=OWNER,
)


def strict_device() -> bool:
    return dicp_config.emugraph_strict_device
