"""User tools built on dicp (op_collector, ...). Each tool is a module runnable with `python -m`."""
