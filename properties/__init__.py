"""properties: the conformance suite that points the spec's invariants at an implementation."""
