"""The bytecode tracer: symbolic frames, opcode handlers, values, the torch table."""
