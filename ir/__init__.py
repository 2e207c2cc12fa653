"""refcomp's IR: types, ops, graphs, text format, verifier, reference interpreter.

Knows nothing of bytecode (refcomp/) or of any backend (codegen/).  Spec: spec/ir.md.
"""

from ir.builder import GraphBuilder
from ir.graph import Graph, Node, Value
from ir.interpreter import run
from ir.parser import ParseError, parse, parse_module
from ir.printer import print_graph
from ir.types import TensorType
from ir.verify import VerificationError, check, verify

__all__ = ["Graph", "GraphBuilder", "Node", "ParseError", "TensorType", "Value",
           "VerificationError", "check", "parse", "parse_module", "print_graph", "run",
           "verify"]
