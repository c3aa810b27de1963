"""dicp: the Device-Independent Compile Platform.

Importing dicp is cheap and changes nothing in torch; backends load when torch asks for them
through the `torch_dynamo_backends` entry points.
"""
__version__ = "0.1.0"
