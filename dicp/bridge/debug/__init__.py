"""The debugging tools: autocompare, op-argument dumps, result records, repros, fault injection.

They attach to the pipeline through its hooks (pipeline/hooks.py), registered here: the pipeline
never imports them. The entry imports this package, so every compile has them; each does nothing
unless its knob is set.
"""

from ..pipeline import hooks
from . import autocompare, fault_injection, op_dump, result_record

hooks.on_graph(op_dump.graph_hook)  # the dump runs inside autocompare's check, as it always did
hooks.on_graph(autocompare.graph_hook)
hooks.on_call(result_record.recording)
hooks.on_fault(fault_injection.fault_for)
