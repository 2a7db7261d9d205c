"""CloudWatch metric math, for the expressions the sandbox can evaluate (moto answers an
expression with nothing, so a policy reading one would always see its metric missing).

Supported: numbers, the ids of the expression's metrics, `+ - * /`, parentheses, and
SUM, AVG, MIN, MAX over a list of ids (`SUM([a, b])`) or over `METRICS()`. Each is
evaluated timestamp by timestamp, where every series it names has a value; a division by
zero gives no value, as CloudWatch drops it. `check` refuses anything else with the reason,
so a scenario names it when it loads instead of running with a metric that never comes.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

FUNCTIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "SUM": sum,
    "AVG": lambda values: sum(values) / len(values),
    "MIN": min,
    "MAX": max,
}
OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
SUPPORTED = "numbers, metric ids, + - * /, and SUM, AVG, MIN, MAX of [ids] or METRICS()"


class UnsupportedExpressionError(ValueError):
    """An expression the sandbox cannot evaluate; the message says what part."""


def check(expression: str, ids: Sequence[str]) -> ast.expr:
    """The parsed expression, or `UnsupportedExpressionError` naming what the sandbox lacks."""
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError:
        raise UnsupportedExpressionError(
            f"{expression!r} is not metric math the sandbox reads"
        ) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in (*FUNCTIONS, "METRICS", *ids):
            raise UnsupportedExpressionError(
                f"{node.id!r} in {expression!r} is not one of its metrics"
            )
        if not _supported(node):
            part = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
            raise UnsupportedExpressionError(
                f"{part} in {expression!r}: the sandbox evaluates only {SUPPORTED}"
            )
    return tree


def _supported(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        arguments = 0 if _name(node) == "METRICS" else 1 if _name(node) in FUNCTIONS else -1
        return len(node.args) == arguments and not node.keywords
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return type(node.op) in OPERATORS
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub)
    return isinstance(node, ast.Name | ast.List | ast.Load | ast.operator | ast.unaryop)


def evaluate(
    expression: str, series: Mapping[str, Mapping[datetime, float]]
) -> dict[datetime, float]:
    """The expression at each timestamp where every series it names has a value."""
    tree = check(expression, list(series))
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in series}
    if any(isinstance(n, ast.Call) and _name(n) == "METRICS" for n in ast.walk(tree)):
        named = set(series)
    times = set.intersection(*(set(series[i]) for i in named)) if named else set()
    values = {}
    for at in times:
        point = {i: series[i][at] for i in named}
        try:
            values[at] = _scalar(tree, point)
        except ZeroDivisionError:
            continue
    return values


def _name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else ""


def _value(node: ast.expr, point: Mapping[str, float]) -> float | list[float]:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name):
        return point[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_scalar(node.operand, point)
    if isinstance(node, ast.BinOp):
        return OPERATORS[type(node.op)](_scalar(node.left, point), _scalar(node.right, point))
    if isinstance(node, ast.List):
        return [_scalar(element, point) for element in node.elts]
    if isinstance(node, ast.Call) and _name(node) == "METRICS":
        return [point[i] for i in sorted(point)]
    if isinstance(node, ast.Call) and len(node.args) == 1:
        values = _value(node.args[0], point)
        return FUNCTIONS[_name(node)](values if isinstance(values, list) else [values])
    raise UnsupportedExpressionError(f"{ast.unparse(node)}: the sandbox evaluates only {SUPPORTED}")


def _scalar(node: ast.expr, point: Mapping[str, float]) -> float:
    value = _value(node, point)
    if isinstance(value, list):
        raise UnsupportedExpressionError(f"{ast.unparse(node)} is a list where a number is needed")
    return value
