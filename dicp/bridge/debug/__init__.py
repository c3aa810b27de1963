"""The debugging tools: autocompare, op-argument dumps, repros, fault injection."""
