"""The legal values of a definition's axes, read from its ``constraints`` (issue 32; docs/records.md).

A definition states which axis values are legal in the same place FlashInfer
Trace states relations between axes: its ``constraints``, Python expressions
over the axes.  This module understands four forms and ignores the rest
(expressions over tensors, like ``num_kv_indices == kv_indptr[-1].item()``,
are the family's business: ``Family.check_axes`` rejects impossible axes):

``1 <= batch_size <= 512``, ``M >= 1``, ``M < 4096``
    a range (both ends needed to draw from it); the other side may use
    constant axes (``total_q <= num_pages * page_size``)
``M % 16 == 0``
    a multiple
``batch_size in (1, 2, 4, 8)``
    a set of choices
``len_indptr == batch_size + 1``
    a variable axis derived from others (``+ - * //`` over axes and integers)

Any other comparison between axes (``num_kv_indices <= num_pages``) is kept
as a check that drawn axes must pass.  Nothing here evaluates arbitrary code:
expressions are walked as ASTs of names, integers and arithmetic only.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kictl.families import family_for
from kictl.records import DefinitionSpec

_ARITHMETIC: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARISONS: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_MIRRORED: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
#: The largest constraint text read (a definition is reviewed, but its constraints are still untrusted input).
MAX_CONSTRAINT_CHARS = 512


class NotAxisArithmetic(ValueError):
    """An expression that is not integer arithmetic over axes."""


def evaluate(node: ast.expr, axes: Mapping[str, int]) -> int:
    """The integer value of ``node``, an expression of names in ``axes``, integers and ``+ - * // %``.

    Raises ``NotAxisArithmetic`` for anything else (a call, a subscript, an unknown name, a division by zero).
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in axes:
            raise NotAxisArithmetic(node.id)
        return axes[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand, axes)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = evaluate(node.left, axes), evaluate(node.right, axes)
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and right == 0:
            raise NotAxisArithmetic("division by zero")
        if abs(left) > 2**62 or abs(right) > 2**62:
            raise NotAxisArithmetic("out of range")
        return _ARITHMETIC[type(node.op)](left, right)
    raise NotAxisArithmetic(ast.dump(node)[:40])


def _names(node: ast.AST) -> set[str]:
    return {item.id for item in ast.walk(node) if isinstance(item, ast.Name)}


@dataclass
class Domain:
    """What one variable axis may be: a range (with a step) or a set of choices."""

    low: int | None = None
    high: int | None = None
    multiple: int = 1
    choices: tuple[int, ...] | None = None

    def bounded(self) -> bool:
        return self.choices is not None or (self.low is not None and self.high is not None)

    def values(self, cap: int | None = None) -> list[int]:
        """Every legal value (at most ``cap`` where given), smallest first; ``[]`` when unbounded."""
        if self.choices is not None:
            found = sorted(
                value
                for value in set(self.choices)
                if self.admits(value, check_choices=False) and (cap is None or value <= cap)
            )
            return found
        if self.low is None or self.high is None:
            return []
        high = self.high if cap is None else min(self.high, cap)
        start = -(-self.low // self.multiple) * self.multiple
        return list(range(start, high + 1, self.multiple)) if start <= high else []

    def admits(self, value: int, *, check_choices: bool = True) -> bool:
        if check_choices and self.choices is not None and value not in self.choices:
            return False
        if self.low is not None and value < self.low:
            return False
        if self.high is not None and value > self.high:
            return False
        return value % self.multiple == 0


@dataclass
class LegalAxes:
    """A definition's variable axes: their domains, the derived ones, and the relations drawn axes must pass."""

    domains: dict[str, Domain] = field(default_factory=dict)
    derived: dict[str, ast.expr] = field(default_factory=dict)
    checks: list[ast.Compare] = field(default_factory=list)
    constants: dict[str, int] = field(default_factory=dict)

    def unstated(self, variable: list[str]) -> list[str]:
        """The variable axes that can be neither drawn nor derived."""
        return [
            axis for axis in variable if axis not in self.derived and not self.domains.get(axis, Domain()).bounded()
        ]

    def complete(self, drawn: Mapping[str, int]) -> dict[str, int]:
        """Constants, ``drawn`` and the derived axes; raises ``NotAxisArithmetic`` when a derivation fails."""
        axes = {**self.constants, **drawn}
        pending = dict(self.derived)
        while pending:
            progressed = False
            for axis, expression in list(pending.items()):
                if _names(expression) <= set(axes):
                    axes[axis] = evaluate(expression, axes)
                    del pending[axis]
                    progressed = True
            if not progressed:
                raise NotAxisArithmetic(f"cannot derive {', '.join(sorted(pending))}")
        return axes

    def admits(self, axes: Mapping[str, int]) -> bool:
        """Whether ``axes`` (all of them) pass every domain and every relation."""
        for axis, domain in self.domains.items():
            if axis in axes and not domain.admits(axes[axis]):
                return False
        for check in self.checks:
            try:
                if not _holds(check, axes):
                    return False
            except NotAxisArithmetic:
                return False
        return True


def _holds(node: ast.Compare, axes: Mapping[str, int]) -> bool:
    left = evaluate(node.left, axes)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = evaluate(comparator, axes)
        if not _COMPARISONS[type(op)](left, right):
            return False
        left = right
    return True


def legal_axes(spec: DefinitionSpec, observed: Sequence[Mapping[str, int]] = ()) -> LegalAxes:
    """What the definition's constraints say about its variable axes (forms in the module's docstring).

    With ``observed`` (the axes of the definition's workloads), a variable axis the constraints leave
    without an upper bound gets the range the workloads span: from its family's least legal value
    (``Family.relations``; else the least observed) to the largest observed.  The family's relations
    (``len_indptr == batch_size + 1``, ``num_kv_indices <= num_pages``) always join the constraints, so that a
    drawn shape has a valid structure.
    """

    constants = {name: axis.value for name, axis in spec.axes.items() if axis.type == "const"}
    variable = {name for name, axis in spec.axes.items() if axis.type == "var"}
    legal = LegalAxes(constants=constants)
    stated = list(spec.constraints or ())
    relations = [text for text in family_for(spec.family).relations(spec) if text not in stated]
    for text in [*stated, *relations]:
        if len(text) > MAX_CONSTRAINT_CHARS:
            continue
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        if isinstance(node, ast.Compare):
            _read_compare(node, legal, variable)
    for axis in sorted(variable - set(legal.derived)):
        seen = [shape[axis] for shape in observed if isinstance(shape.get(axis), int)]
        domain = legal.domains.setdefault(axis, Domain())
        if not seen or domain.bounded():
            continue
        domain.high = max(seen)
        if domain.low is None:
            domain.low = min(seen)
        domain.low = min(domain.low, domain.high)
    return legal


def range_constraints(spec: DefinitionSpec, observed: Sequence[Mapping[str, int]]) -> list[str]:
    """The constraints a definition imported without ranges can state, so that held-out shapes apply to it.

    For each variable axis that neither the definition's constraints nor its family's relations bound (or
    derive), ``low <= axis <= high`` over what ``observed`` (its workloads' axes) spans, ``low`` being the
    family's least legal value where it states one; then the family's relations not already stated.  Axes
    no workload gives a value stay unbounded.
    """
    legal = legal_axes(spec, observed)
    bare = legal_axes(spec)
    stated = list(spec.constraints or ())
    out: list[str] = []
    for axis, domain in sorted(legal.domains.items()):
        if axis in legal.derived or bare.domains.get(axis, Domain()).bounded() or not domain.bounded():
            continue
        out.append(f"{domain.low} <= {axis} <= {domain.high}")

    out += [text for text in family_for(spec.family).relations(spec) if text not in stated]
    return out


def _read_compare(node: ast.Compare, legal: LegalAxes, variable: set[str]) -> None:
    names = _names(node)
    if not names <= variable | set(legal.constants):
        return  # over tensors or unknown names: the family's business
    operands = [node.left, *node.comparators]
    if len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
        target, options = node.left, node.comparators[0]
        if (
            isinstance(target, ast.Name)
            and target.id in variable
            and isinstance(options, ast.Tuple | ast.List | ast.Set)
        ):
            try:
                values = tuple(evaluate(item, legal.constants) for item in options.elts)
            except NotAxisArithmetic:
                return
            legal.domains.setdefault(target.id, Domain()).choices = values
        return
    if not all(type(op) in _COMPARISONS for op in node.ops):
        return
    if len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        left, right = node.left, node.comparators[0]
        # M % 16 == 0
        if (
            isinstance(left, ast.BinOp)
            and isinstance(left.op, ast.Mod)
            and isinstance(left.left, ast.Name)
            and left.left.id in variable
        ):
            try:
                step, rest = evaluate(left.right, legal.constants), evaluate(right, legal.constants)
            except NotAxisArithmetic:
                return
            if step > 0 and rest == 0:
                domain = legal.domains.setdefault(left.left.id, Domain())
                domain.multiple = domain.multiple * step // _gcd(domain.multiple, step)
                return
        # len_indptr == batch_size + 1
        for target, expression in ((left, right), (right, left)):
            if (
                isinstance(target, ast.Name)
                and target.id in variable
                and target.id not in legal.derived
                and target.id not in _names(expression)
                and _names(expression) & variable
            ):
                legal.derived[target.id] = expression
                return
    bounded = False
    for index, op in enumerate(node.ops):
        left, right = operands[index], operands[index + 1]
        bounded = _bound(left, op, right, legal, variable) or bounded
    if not bounded or len(names & variable) > 1:
        legal.checks.append(node)


def _bound(left: ast.expr, op: ast.cmpop, right: ast.expr, legal: LegalAxes, variable: set[str]) -> bool:
    """Record ``axis OP constant`` (either way round) as a bound; whether it was one."""
    if isinstance(right, ast.Name) and right.id in variable and not _names(left) & variable:
        left, right, op = right, left, _MIRRORED.get(type(op), type(op))()
    if not (isinstance(left, ast.Name) and left.id in variable) or _names(right) & variable:
        return False
    try:
        value = evaluate(right, legal.constants)
    except NotAxisArithmetic:
        return False
    domain = legal.domains.setdefault(left.id, Domain())
    if isinstance(op, ast.LtE | ast.Lt):
        high = value - 1 if isinstance(op, ast.Lt) else value
        domain.high = high if domain.high is None else min(domain.high, high)
    elif isinstance(op, ast.GtE | ast.Gt):
        low = value + 1 if isinstance(op, ast.Gt) else value
        domain.low = low if domain.low is None else max(domain.low, low)
    elif isinstance(op, ast.Eq):
        domain.choices = (value,)
    else:
        return False
    return True


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
