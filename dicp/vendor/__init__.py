"""dicp's in-tree backends. Each imports `dicp.api` and nothing else of dicp, and registers
itself on import; torch finds it through its `torch_dynamo_backends` entry point (setup.py)."""
