"""Run a small, SEER-style Python program safely::

    table_query_0 = table["Revenue", "2019"]     # or table.loc["Revenue", "2019"]; table["Revenue", :]
    text_variable_0 = 1234.5
    step_0 = table_query_0 - text_variable_0
    ans = step_0 / text_variable_0 * 100
    scale = "percent"                            # optional: "", thousand, million, billion, percent

The program is parsed with :mod:`ast` and interpreted node by node; nothing is ever passed to ``exec`` /
``eval``. Only a whitelist is interpreted: number / string / list / tuple literals, names, ``+ - * / // %
**``, unary ``- + not``, comparisons, ``and`` / ``or``, ``x if c else y``, assignment to simple names
(also ``+=``-style), subscripts of ``table`` / ``table.loc`` / lists / strings, list comprehensions and
generator expressions (``sum(1 for x in values if x > 0)``: evaluated to a list, their loop names local to
them), and calls to the functions of :mod:`knapsack_dspy.docqa.sandbox.python_functions`. Everything else
(imports, attributes other than ``table.loc``, other calls, ``for`` / ``while`` statements, set and dict
comprehensions, lambdas, ``def`` / ``class`` / ``with`` / ``try``, f-strings, dunder names, ...) is rejected
before anything runs. Sizes, magnitudes, syntax-tree size and depth and the wall-clock time (checked at every
node) are bounded (:class:`Limits`).

The answer is the variable ``ans``. A program that never sets ``ans`` answers with its last value: the last
expression statement (a lone expression; a bare string, a docstring, is not one) or the last value assigned
(other than ``scale``), whichever comes later -- small models often compute the answer into a named variable
and forget the final ``ans = ...``.
"""

from __future__ import annotations

import ast
import math
import re
import textwrap
import time

from knapsack_dspy.docqa.sandbox.python_errors import ProgramFailure
from knapsack_dspy.docqa.sandbox.python_functions import FUNCTIONS, CallContext, constant_value
from knapsack_dspy.docqa.sandbox.python_limits import Limits, binary_operation, check_value, size_of
from knapsack_dspy.docqa.sandbox.result import ExecutionResult
from knapsack_dspy.docqa.sandbox.table_view import TableLookupError, TableView

__all__ = ["SCALES", "Limits", "execute_python", "extract_code"]

SCALES = ("", "thousand", "million", "billion", "percent")
ANSWER = "ans"
SCALE = "scale"
TABLE = "table"

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_UNPARSABLE = re.compile("[\x00\ud800-\udfff]")

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**"}
_COMPARE = {
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_ALLOWED = (
    ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.Pass,
    ast.Constant, ast.Name, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
    ast.Subscript, ast.Slice, ast.Attribute, ast.Call, ast.ListComp, ast.GeneratorExp, ast.comprehension,
    ast.Load, ast.Store, ast.And, ast.Or, ast.USub, ast.UAdd, ast.Not,
    *_BINARY, *_COMPARE,
)
_DESCRIPTIONS = {
    ast.Import: "import", ast.ImportFrom: "import", ast.Lambda: "lambda", ast.FunctionDef: "def",
    ast.AsyncFunctionDef: "def", ast.ClassDef: "class", ast.While: "while loops", ast.For: "for loops",
    ast.AsyncFor: "for loops", ast.With: "with", ast.AsyncWith: "with", ast.Try: "try",
    ast.Raise: "raise", ast.Assert: "assert", ast.Delete: "del", ast.Global: "global",
    ast.Nonlocal: "nonlocal", ast.SetComp: "set comprehensions", ast.DictComp: "dict comprehensions",
    ast.Yield: "yield",
    ast.YieldFrom: "yield", ast.Await: "await", ast.Return: "return", ast.If: "if statements (use "
    "'x if condition else y')", ast.JoinedStr: "f-strings", ast.FormattedValue: "f-strings",
    ast.NamedExpr: "':='", ast.Starred: "'*' unpacking", ast.Dict: "dict literals", ast.Set: "set literals",
    ast.MatMult: "'@'", ast.BitAnd: "'&'", ast.BitOr: "'|'", ast.BitXor: "'^'", ast.LShift: "'<<'",
    ast.RShift: "'>>'", ast.Invert: "'~'", ast.Is: "'is'", ast.IsNot: "'is not'",
}
if hasattr(ast, "TryStar"):
    _DESCRIPTIONS[ast.TryStar] = "try"
if hasattr(ast, "Match"):
    _DESCRIPTIONS[ast.Match] = "match"


class _TableRef:
    """The value of the name ``table`` (or ``table.loc``): only subscripting it is allowed."""

    def __init__(self, view: TableView | None):
        self.view = view


def extract_code(text: str) -> str:
    """The program inside a ```` ```python ```` fence when there is one (else the text), dedented."""
    match = _FENCE.search(text)
    code = match.group(1) if match else text
    return textwrap.dedent(code).strip("\n")


def _check_characters(source: str) -> None:
    """Characters Python's parser refuses, named: a NUL byte, a lone surrogate (half of a UTF-16 pair)."""
    match = _UNPARSABLE.search(source)
    if match:
        char = match.group()
        what = ("a NUL byte" if char == "\x00"
                else f"a lone surrogate (U+{ord(char):04X}, half of a UTF-16 pair)")
        line = source.count("\n", 0, match.start()) + 1
        raise ProgramFailure("SyntaxError", f"the program contains {what}", line)


def _line(node) -> int | None:
    return getattr(node, "lineno", None)


def _not_allowed(node, what: str | None = None) -> ProgramFailure:
    what = what or _DESCRIPTIONS.get(type(node), f"{type(node).__name__} nodes")
    return ProgramFailure("NotAllowed", f"{what} not allowed", _line(node))


def _reserved(name: str) -> bool:
    return name in FUNCTIONS or name == TABLE or constant_value(name) is not None


def _check_name(name: str, node) -> None:
    if "__" in name:
        raise ProgramFailure("NotAllowed", f"dunder names like {name!r} are not allowed", _line(node))


def _validate(tree: ast.Module, limits: Limits) -> None:
    """Reject anything outside the whitelist, and trees that are too big or too deep (iteratively)."""
    count = 0
    stack: list[tuple[ast.AST, int, int | None]] = [(tree, 0, None)]
    while stack:
        node, depth, line = stack.pop()
        line = _line(node) or line
        count += 1
        if count > limits.max_nodes:
            raise ProgramFailure("LimitExceeded", f"program too large (more than {limits.max_nodes} syntax nodes)")
        if depth > limits.max_depth:
            raise ProgramFailure("LimitExceeded", f"expression nested too deeply (more than {limits.max_depth} "
                                                  "levels)", line)
        if not isinstance(node, _ALLOWED):
            failure = _not_allowed(node)
            failure.line = failure.line or line
            raise failure
        if isinstance(node, ast.Name):
            _check_name(node.id, node)
        elif isinstance(node, ast.Constant):
            if not (node.value is None or isinstance(node.value, (bool, int, float, str))):
                raise ProgramFailure("NotAllowed", f"{type(node.value).__name__} literals are not allowed", line)
        elif isinstance(node, ast.Attribute):
            if not (node.attr == "loc" and isinstance(node.value, ast.Name) and node.value.id == TABLE):
                raise ProgramFailure("NotAllowed", f"attribute access '.{node.attr}' is not allowed "
                                                   "(only table.loc)", line)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                raise ProgramFailure("NotAllowed", f"method calls like '.{node.func.attr}(...)' are not allowed", line)
            if not isinstance(node.func, ast.Name):
                raise ProgramFailure("NotAllowed", "only the allowed functions can be called, by name", line)
            if node.func.id not in FUNCTIONS:
                raise ProgramFailure("NotAllowed", f"calling {node.func.id!r} is not allowed (allowed: "
                                                   f"{', '.join(FUNCTIONS)})", line)
            if node.keywords:
                raise ProgramFailure("NotAllowed", "keyword arguments are not allowed", line)
        elif isinstance(node, ast.comprehension):
            if node.is_async:
                raise ProgramFailure("NotAllowed", "async comprehensions are not allowed", line)
            for target in _loop_names(node.target, line):
                _check_name(target.id, target)
                if _reserved(target.id):
                    raise ProgramFailure("NotAllowed", f"{target.id!r} is a reserved name", line)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not isinstance(target, ast.Name):
                    raise ProgramFailure("NotAllowed", "only simple names can be assigned to "
                                                       f"(not {ast.unparse(target)[:40]!r})", line)
                _check_name(target.id, target)
                if _reserved(target.id):
                    raise ProgramFailure("NotAllowed", f"{target.id!r} is a reserved name", line)
            if isinstance(node, ast.AugAssign) and type(node.op) not in _BINARY:
                raise _not_allowed(node.op)
        # children pushed in reverse so that problems are reported in source order
        stack.extend((child, depth + 1, line) for child in reversed(list(ast.iter_child_nodes(node))))


def _loop_names(target, line) -> list[ast.Name]:
    """The names a comprehension's ``for`` binds: a name, or a flat tuple / list of names."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
        return list(target.elts)
    raise ProgramFailure("NotAllowed", "a comprehension's 'for' binds a name or a tuple of names "
                                       f"(not {ast.unparse(target)[:40]!r})", line)


class _Interpreter:
    def __init__(self, view: TableView | None, limits: Limits, deadline: float, time_limit: float):
        self.variables: dict = {}
        self.limits = limits
        self.deadline = deadline
        self.time_limit = time_limit
        self.table = _TableRef(view)
        self.context = CallContext(table=view, limits=limits)
        self.last_expression = None
        self.last_assigned: str | None = None  # the name the last assignment bound (the fallback answer)
        self.expression_last = False  # whether the last statement with a value was an expression

    # -- statements -----------------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        for statement in tree.body:
            try:
                self._statement(statement)
            except ProgramFailure as failure:
                failure.line = failure.line or _line(statement)
                raise

    def _statement(self, node) -> None:
        self._tick()
        if isinstance(node, ast.Assign):
            value = self._storable(self.eval(node.value), node)
            for target in node.targets:
                self.variables[target.id] = value
            self._assigned(node.targets[-1].id)
        elif isinstance(node, ast.AugAssign):
            current = self._name(node.target.id, node.target)
            value = self.eval(node.value)
            self.variables[node.target.id] = self._storable(
                binary_operation(_BINARY[type(node.op)], current, value, self.limits), node)
            self._assigned(node.target.id)
        elif isinstance(node, ast.Expr):
            value = self.eval(node.value)
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):  # not a docstring
                self.last_expression, self.expression_last = value, True
        # ast.Pass: nothing

    def _assigned(self, name: str) -> None:
        if name != SCALE:
            self.last_assigned, self.expression_last = name, False

    def _storable(self, value, node):
        if isinstance(value, _TableRef):
            raise ProgramFailure("TypeError", "the table cannot be stored in a variable; use table[row, column]",
                                 _line(node))
        return value

    # -- expressions ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise ProgramFailure("TimeoutError", f"time limit of {self.time_limit:g} s exceeded")

    def eval(self, node):
        self._tick()
        try:
            method = getattr(self, f"_{type(node).__name__}")
            return method(node)
        except ProgramFailure as failure:
            failure.line = failure.line or _line(node)
            raise

    def _Constant(self, node):
        return check_value(node.value, self.limits)

    def _name(self, name: str, node):
        if name in self.variables:
            return self.variables[name]
        constant = constant_value(name)
        if constant is not None:
            return check_value(constant, self.limits)
        if name == TABLE:
            return self.table
        if name in FUNCTIONS:
            raise ProgramFailure("TypeError", f"{name!r} is a function; call it like {name}(...)", _line(node))
        raise ProgramFailure("NameError", f"name {name!r} is not defined", _line(node))

    def _Name(self, node):
        return self._name(node.id, node)

    def _List(self, node):
        return check_value([self._plain(self.eval(item), item) for item in node.elts], self.limits)

    def _Tuple(self, node):
        return check_value(tuple(self._plain(self.eval(item), item) for item in node.elts), self.limits)

    def _plain(self, value, node):
        if isinstance(value, _TableRef):
            raise ProgramFailure("TypeError", "the table can only be subscripted: table[row, column]", _line(node))
        return value

    def _BinOp(self, node):
        left = self._plain(self.eval(node.left), node.left)
        right = self._plain(self.eval(node.right), node.right)
        return binary_operation(_BINARY[type(node.op)], left, right, self.limits)

    def _UnaryOp(self, node):
        value = self._plain(self.eval(node.operand), node.operand)
        if isinstance(node.op, ast.Not):
            return not value
        if not isinstance(value, (int, float)):
            sign = "-" if isinstance(node.op, ast.USub) else "+"
            raise ProgramFailure("TypeError", f"bad operand type for unary {sign}: {type(value).__name__}")
        return check_value(-value if isinstance(node.op, ast.USub) else +value, self.limits)

    def _Compare(self, node):
        left = self._plain(self.eval(node.left), node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._plain(self.eval(comparator), comparator)
            try:
                holds = _COMPARE[type(op)](left, right)
            except TypeError:
                raise ProgramFailure("TypeError", f"cannot compare {type(left).__name__} with "
                                                  f"{type(right).__name__}") from None
            if not holds:
                return False
            left = right
        return True

    def _BoolOp(self, node):
        value = None
        for operand in node.values:
            value = self._plain(self.eval(operand), operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _IfExp(self, node):
        condition = self._plain(self.eval(node.test), node.test)
        return self.eval(node.body if condition else node.orelse)

    def _ListComp(self, node):
        return self._comprehension(node)

    def _GeneratorExp(self, node):  # evaluated at once, to a list: every function here takes a list
        return self._comprehension(node)

    def _comprehension(self, node) -> list:
        saved = dict(self.variables)  # the loop names are the comprehension's own (as in Python 3)
        out: list = []
        try:
            self._produce(node.elt, node.generators, out, [0])
        finally:
            self.variables = saved
        return check_value(out, self.limits)

    def _produce(self, elt, generators, out: list, size: list[int]) -> None:
        """Append ``elt`` for each binding of ``generators`` to ``out``; ``size`` ([items + nested items and
        characters so far]) is checked as each item is added, so a list of large items fails when it passes
        ``max_items``, not after it was built."""
        first, rest = generators[0], generators[1:]
        iterable = self._plain(self.eval(first.iter), first.iter)
        if not isinstance(iterable, (list, tuple, str)):
            raise ProgramFailure("TypeError", f"cannot loop over a {type(iterable).__name__}")
        names = _loop_names(first.target, _line(first.target))
        for item in iterable:
            self._tick()
            if len(names) == 1 and isinstance(first.target, ast.Name):
                self.variables[names[0].id] = item
            else:
                if not isinstance(item, (list, tuple)) or len(item) != len(names):
                    raise ProgramFailure("ValueError", f"cannot unpack {item!r:.40} into {len(names)} names")
                for name, value in zip(names, item, strict=True):
                    self.variables[name.id] = value
            if not all(self._plain(self.eval(test), test) for test in first.ifs):
                continue
            if rest:
                self._produce(elt, rest, out, size)
            else:
                item = self._plain(self.eval(elt), elt)
                size[0] += 1 + size_of(item, self.limits.max_items)
                if size[0] > self.limits.max_items:
                    raise ProgramFailure("LimitExceeded", f"string or list too long (more than "
                                                          f"{self.limits.max_items} items)")
                out.append(item)

    def _Attribute(self, node):
        return self.eval(node.value)  # validated: only table.loc

    def _Call(self, node):
        args = [self._plain(self.eval(arg), arg) for arg in node.args]
        result = FUNCTIONS[node.func.id](self.context, args)
        return check_value(result, self.limits)

    def _Slice(self, node):
        parts = []
        for part in (node.lower, node.upper, node.step):
            value = None if part is None else self.eval(part)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ProgramFailure("TypeError", "slice bounds must be integers")
            parts.append(value)
        if parts[2] == 0:
            raise ProgramFailure("ValueError", "slice step cannot be zero")
        return slice(*parts)

    def _Subscript(self, node):
        container = self.eval(node.value)
        if isinstance(container, _TableRef):
            return self._table_lookup(container, node.slice)
        key = self.eval(node.slice)
        if not isinstance(container, (list, tuple, str)):
            raise ProgramFailure("TypeError", f"a {type(container).__name__} cannot be subscripted")
        if isinstance(key, slice):
            return container[key]
        if not isinstance(key, int) or isinstance(key, bool):
            raise ProgramFailure("TypeError", f"indices must be integers, not {type(key).__name__}")
        try:
            return container[key]
        except IndexError:
            raise ProgramFailure("IndexError", f"index {key} out of range (length {len(container)})") from None

    def _table_lookup(self, ref: _TableRef, key_node):
        if ref.view is None:
            raise ProgramFailure("NameError", "no table was given to this program")
        keys = key_node.elts if isinstance(key_node, ast.Tuple) else [key_node]
        if len(keys) != 2:
            raise ProgramFailure("TypeError", "use table[row, column] (or table[row, :] / table[:, column])")
        row_key, column_key = keys
        whole_row = isinstance(column_key, ast.Slice) and not (column_key.lower or column_key.upper or column_key.step)
        whole_column = isinstance(row_key, ast.Slice) and not (row_key.lower or row_key.upper or row_key.step)
        try:
            if whole_row and whole_column:
                raise ProgramFailure("TypeError", "table[:, :] is not supported; pick a row or a column")
            if whole_row:
                return self._cell_values(ref.view.row_values(self._label(row_key)))
            if whole_column:
                return self._cell_values(ref.view.column_values(self._label(column_key)))
            return self._cell_values(ref.view.get(self._label(row_key), self._label(column_key)))
        except TableLookupError as exc:
            raise ProgramFailure("KeyError", str(exc)) from None

    def _cell_values(self, value):
        """Numbers read from table cells pass the same bounds as computed ones (finite, ``max_magnitude``)."""
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise ProgramFailure("ValueError", f"a table cell reads as {item}, not a finite number")
            if isinstance(item, float) and abs(item) > self.limits.max_magnitude:
                raise ProgramFailure("LimitExceeded", f"a table cell reads as {item:.6g}, a number too large "
                                                      f"(|x| > {self.limits.max_magnitude:g})")
        return check_value(value, self.limits)

    def _label(self, node):
        if isinstance(node, ast.Slice):
            raise ProgramFailure("TypeError", "only ':' (a whole row or column) can be used as a table slice")
        value = self.eval(node)
        if isinstance(value, (_TableRef, list, tuple)):
            raise ProgramFailure("TypeError", "a table label is a string (or a year like 2019)")
        return value


def _answer_and_scale(interpreter: _Interpreter):
    variables = interpreter.variables
    if ANSWER in variables:
        answer = variables[ANSWER]
    elif interpreter.expression_last:
        answer = interpreter.last_expression
    elif interpreter.last_assigned is not None:
        answer = variables[interpreter.last_assigned]
    else:
        raise ProgramFailure("NameError", f"the program did not set {ANSWER!r}")
    if isinstance(answer, _TableRef):
        raise ProgramFailure("TypeError", "the answer must be a number, text or a list, not the table")
    if isinstance(answer, tuple):
        answer = list(answer)
    # The program's scale is a hint (the answer's scale is decided with the document, data.answer_scale): a word
    # outside SCALES ("per share", "year") is dropped, never a failure that would throw a computed answer away.
    scale = variables.get(SCALE, "")
    if not isinstance(scale, str) or scale.strip().lower() not in SCALES:
        scale = ""
    return answer, scale.strip().lower()


def execute_python(code: str, table: list[list[str]] | None = None, time_limit: float = 1.0,
                   limits: Limits | None = None) -> ExecutionResult:
    """Run ``code`` (optionally inside a ```` ```python ```` fence) against ``table`` (rows of cells, first
    row the header) and return an :class:`ExecutionResult`; never raises, never has side effects.

    ``time_limit`` is wall-clock seconds, checked at every syntax node; ``limits`` bounds sizes.
    """
    limits = limits or Limits()
    start = time.monotonic()
    interpreter = None
    try:
        if not isinstance(code, str):
            raise ProgramFailure("TypeError", f"the program must be a string, got {type(code).__name__}")
        if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit >= 0:
            raise ProgramFailure("TypeError", f"time_limit must be a number of seconds >= 0, got {time_limit!r}")
        if len(code) > limits.max_code_chars:
            raise ProgramFailure("LimitExceeded", f"program too long ({len(code)} characters; at most "
                                                  f"{limits.max_code_chars})")
        source = extract_code(code)
        if not source.strip():
            raise ProgramFailure("SyntaxError", "empty program")
        _check_characters(source)
        try:
            tree = ast.parse(source, mode="exec")
        except SyntaxError as exc:
            raise ProgramFailure("SyntaxError", exc.msg or "invalid syntax", exc.lineno) from None
        except ValueError as exc:  # e.g. a character the parser cannot encode
            raise ProgramFailure("SyntaxError", f"the program cannot be parsed ({exc})") from None
        except (RecursionError, MemoryError, OverflowError):
            raise ProgramFailure("LimitExceeded", "program nested too deeply to parse") from None
        _validate(tree, limits)
        view = None
        if table is not None and len(table) > 0:  # no table, or an empty one: a look-up says so when tried
            try:
                view = TableView(table)
            except TypeError as exc:
                raise ProgramFailure("TypeError", str(exc)) from None
        interpreter = _Interpreter(view, limits, start + float(time_limit), float(time_limit))
        interpreter.run(tree)
        answer, scale = _answer_and_scale(interpreter)
    except ProgramFailure as failure:
        variables = dict(interpreter.variables) if interpreter else {}
        return ExecutionResult.failure(failure.describe(), variables=variables)
    except (RecursionError, MemoryError) as exc:
        return ExecutionResult.failure(f"LimitExceeded: {type(exc).__name__}")
    except Exception as exc:  # noqa: BLE001 -- never crash the caller; this is a bug if it happens
        return ExecutionResult.failure(f"InternalError: {type(exc).__name__}: {exc}")
    return ExecutionResult.success(answer, scale=scale, variables=dict(interpreter.variables))
