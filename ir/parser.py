"""The parser: textual IR back to a Graph.  Errors carry line:col.  Spec: spec/ir.md.

Grammar (comments run from `#` to the end of the line):

    module  := func+
    func    := 'func' '@' NAME '(' [param (',' param)*] ')' '->' results '{' body '}'
    param   := '%' NAME ':' type
    results := type | '(' [type (',' type)*] ')'
    type    := DTYPE '[' [dim (',' dim)*] ']' ['@' DEVICE]
    dim     := INT | SYMBOL | dim ('+' | '-' | '*') dim | '(' dim ')'
    body    := stmt* 'return' [value (',' value)*]
    stmt    := value (',' value)* '=' OP [value (',' value)*] [attrs] ':' type (',' type)*
               ['{' '^' '(' [param (',' param)*] ')' ':' body '}']
    attrs   := '{' NAME '=' attr (',' NAME '=' attr)* '}'
    attr    := number | 'true' | 'false' | 'none' | STRING | DTYPE | dim | '[' [attr,...] ']'

Result types written in the text are checked against each op's type rule by the
verifier, not trusted.  A body sees only its own parameters and values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import sympy

from ir.graph import Graph, Node, Value
from ir.ops.registry import lookup
from ir.plan import parse_plan
from ir.types import BY_SHORT, TensorType, size_symbol


class ParseError(ValueError):
    def __init__(self, message: str, line: int, col: int, source_line: str = ""):
        self.message, self.line, self.col = message, line, col
        pointer = f"\n  {source_line}\n  {' ' * (col - 1)}^" if source_line else ""
        super().__init__(f"line {line}:{col}: {message}{pointer}")


@dataclass
class Token:
    kind: str
    text: str
    line: int
    col: int


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+) | (?P<nl>\n) | (?P<comment>\#[^\n]*)
  | (?P<value>%[A-Za-z0-9_.]+)
  | (?P<at>@[A-Za-z_][A-Za-z0-9_.:]*)
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<arrow>->)
  | (?P<punct>[(){}\[\],:=^+*-])
""", re.VERBOSE)


def tokenize(text: str) -> list[Token]:
    tokens, line, line_start, pos = [], 1, 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            col = pos - line_start + 1
            raise ParseError(f"unexpected character {text[pos]!r}", line, col,
                             _line_text(text, line))
        kind = m.lastgroup
        if kind == "nl":
            line, line_start = line + 1, m.end()
        elif kind not in ("ws", "comment"):
            tokens.append(Token(kind, m.group(), line, pos - line_start + 1))
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens


def _line_text(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


class Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.symbols: dict[str, sympy.Symbol] = {}

    # --- token helpers ----------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        return ParseError(message, tok.line, tok.col, _line_text(self.text, tok.line))

    def next(self) -> Token:
        tok = self.tok
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind in ("punct", "ident", "arrow")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        if not self.at(text):
            found = self.tok.text or "end of input"
            raise self.error(f"expected {text!r}, found {found!r}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            found = self.tok.text or "end of input"
            raise self.error(f"expected {what}, found {found!r}")
        return self.next()

    # --- grammar ----------------------------------------------------------------------------
    def module(self) -> list[Graph]:
        graphs = []
        while self.tok.kind != "eof":
            graphs.append(self.func())
        if not graphs:
            raise self.error("expected 'func'")
        return graphs

    def func(self) -> Graph:
        self.expect("func")
        name = self.expect_kind("at", "a function name like @forward").text[1:]
        scope: dict[str, Value] = {}
        self.expect("(")
        inputs = self.params(scope)
        self.expect(")")
        self.expect("->")
        result_tok = self.tok
        if self.accept("("):
            results = [] if self.at(")") else self.type_list()
            self.expect(")")
        else:
            results = [self.type()]
        self.expect("{")
        nodes, outputs = self.body(scope)
        self.expect("}")
        if [v.type for v in outputs] != results:
            raise self.error(f"returned types ({', '.join(str(v.type) for v in outputs)}) "
                             "differ from the signature", result_tok)
        graph = Graph(name, inputs, nodes, outputs)
        if self.at("plan"):  # an optional memory plan section (spec/memory.md)
            graph.plan = parse_plan(self, scope)
        return graph

    def params(self, scope) -> list[Value]:
        values = []
        if self.at(")"):
            return values
        while True:
            tok = self.expect_kind("value", "a parameter like %x")
            self.expect(":")
            value = Value(self.type(), tok.text[1:])
            self.define(scope, tok, value)
            values.append(value)
            if not self.accept(","):
                return values

    def define(self, scope, tok: Token, value: Value):
        name = tok.text[1:]
        if name in scope:
            raise self.error(f"%{name} is defined twice", tok)
        scope[name] = value
        if name.isdigit():
            value.name = None  # numbers are re-derived by the printer
        else:
            value.name = name

    def body(self, scope) -> tuple[list[Node], list[Value]]:
        nodes = []
        while not self.at("return"):
            if self.tok.kind == "eof" or self.at("}"):
                raise self.error("expected 'return' before the end of the body")
            nodes.append(self.stmt(scope))
        self.expect("return")
        outputs = []
        if self.tok.kind == "value":
            outputs.append(self.use(scope))
            while self.accept(","):
                outputs.append(self.use(scope))
        return nodes, outputs

    def use(self, scope) -> Value:
        tok = self.expect_kind("value", "a value like %0")
        try:
            return scope[tok.text[1:]]
        except KeyError:
            raise self.error(f"{tok.text} is used before it is defined", tok) from None

    def stmt(self, scope) -> Node:
        result_toks = [self.expect_kind("value", "a result like %0")]
        while self.accept(","):
            result_toks.append(self.expect_kind("value", "a result like %1"))
        self.expect("=")
        op_tok = self.expect_kind("ident", "an op name")
        try:
            op = lookup(op_tok.text)
        except KeyError:
            raise self.error(f"unknown op {op_tok.text!r}", op_tok) from None
        operands = []
        if self.tok.kind == "value":
            operands.append(self.use(scope))
            while self.accept(","):
                operands.append(self.use(scope))
        attrs = self.attrs(op) if self.at("{") else {}
        self.expect(":")
        types = self.type_list()
        if len(types) != len(result_toks):
            raise self.error(f"{len(result_toks)} results but {len(types)} types", op_tok)
        body = None
        if self.accept("{"):
            body = self.region()
            self.expect("}")
        try:
            attrs = op.normalize_attrs(attrs)
        except ValueError as e:
            raise self.error(str(e), op_tok) from None
        outputs = []
        for tok, t in zip(result_toks, types):
            value = Value(t)
            self.define(scope, tok, value)
            outputs.append(value)
        return Node(op, operands, attrs, outputs, body)

    def region(self) -> Graph:
        self.expect("^")
        self.expect("(")
        inner: dict[str, Value] = {}
        inputs = self.params(inner)
        self.expect(")")
        self.expect(":")
        nodes, outputs = self.body(inner)
        return Graph("body", inputs, nodes, outputs)

    def attrs(self, op) -> dict:
        self.expect("{")
        out = {}
        while True:
            name_tok = self.expect_kind("ident", "an attribute name")
            if name_tok.text not in op.attrs:
                valid = ", ".join(op.attrs) or "none"
                raise self.error(f"op {op.name!r} has no attribute {name_tok.text!r};"
                                 f" valid: {valid}", name_tok)
            self.expect("=")
            out[name_tok.text] = self.attr_value(op.attrs[name_tok.text].kind)
            if not self.accept(","):
                break
        self.expect("}")
        return out

    def attr_value(self, kind: str):
        tok = self.tok
        if self.accept("["):
            items = []
            if not self.at("]"):
                items.append(self.attr_value(kind))
                while self.accept(","):
                    items.append(self.attr_value(kind))
            self.expect("]")
            return tuple(items) if kind in ("ints", "dims") else items
        if tok.kind == "string":
            self.next()
            return json.loads(tok.text)
        if tok.kind == "ident" and tok.text in ("true", "false", "none"):
            self.next()
            return {"true": True, "false": False, "none": None}[tok.text]
        if kind == "dtype":
            return self.dtype()
        if kind in ("dims", "dim"):
            return self.dim()
        return self.number()

    def number(self):
        tok = self.tok
        negative = self.accept("-")
        tok = self.next()
        if tok.kind == "int":
            value = int(tok.text)
        elif tok.kind == "float":
            value = float(tok.text)
        elif tok.kind == "ident" and tok.text in ("inf", "nan"):
            value = float(tok.text)
        else:
            raise self.error(f"expected a number, found {tok.text!r}", tok)
        return -value if negative else value

    def dtype(self):
        tok = self.expect_kind("ident", "a dtype like f32")
        if tok.text not in BY_SHORT:
            raise self.error(f"unknown dtype {tok.text!r}; valid: {', '.join(BY_SHORT)}", tok)
        return BY_SHORT[tok.text]

    def type_list(self) -> list[TensorType]:
        types = [self.type()]
        while self.accept(","):
            types.append(self.type())
        return types

    def type(self) -> TensorType:
        dtype = self.dtype()
        self.expect("[")
        dims = []
        if not self.at("]"):
            dims.append(self.dim())
            while self.accept(","):
                dims.append(self.dim())
        self.expect("]")
        device = "cpu"
        if self.tok.kind == "at":
            device = self.next().text[1:]
        return TensorType(dtype, tuple(dims), device)

    # dim := term (('+'|'-') term)*, term := atom ('*' atom)*, atom := INT | SYMBOL | (dim)
    def dim(self):
        value = self.term()
        while self.at("+") or self.at("-"):
            if self.next().text == "+":
                value = value + self.term()
            else:
                value = value - self.term()
        return value if not isinstance(value, sympy.Integer) else int(value)

    def term(self):
        value = self.atom()
        while self.accept("*"):
            value = value * self.atom()
        return value

    def atom(self):
        tok = self.next()
        if tok.kind == "int":
            return int(tok.text)
        if tok.kind == "ident":
            if tok.text not in self.symbols:
                self.symbols[tok.text] = size_symbol(tok.text)
            return self.symbols[tok.text]
        if tok.text == "-":
            return -self.atom()
        if tok.text == "(":
            value = self.dim()
            self.expect(")")
            return value
        raise self.error(f"expected a size (integer or symbol), found {tok.text!r}", tok)


def parse(text: str) -> Graph:
    """Parse exactly one function."""
    graphs = Parser(text).module()
    if len(graphs) != 1:
        raise ValueError(f"expected one func, found {len(graphs)}; use parse_module")
    return graphs[0]


def parse_module(text: str) -> list[Graph]:
    return Parser(text).module()
