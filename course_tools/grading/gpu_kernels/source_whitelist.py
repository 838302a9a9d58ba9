"""What the two kernel whitelists share (``kernel_whitelist`` for Numba CUDA kernels, lessons 03
and 04; ``triton_source`` for Triton kernels, lessons 14 and 15): the refusal, the parse of one
plain function definition within a size (a kernel still raising the release's stub is not
answered yet: :class:`Unanswered`), the words for refused syntax, and the visitor that
refuses anything not allowed, in source order, with a plain reason. Each whitelist adds its own
vocabulary and rules. Sizes are characters and syntax-tree nodes.

Stdlib only (the checker imports it before the instructor's setup has run).
"""
from __future__ import annotations

import ast


class Refused(ValueError):
    """A kernel the checker will not run; the message says why, in plain words."""


class Unanswered(Refused):
    """A kernel that still holds the release's stub (``raise NotImplementedError()`` under
    ``# YOUR CODE HERE``): the exercise is not answered yet."""


def unanswered_text(name: str) -> str:
    """What the student is told of an unanswered exercise ``name`` (as ``course_lib.checks.unanswered``
    says it in the notebook)."""
    return f"{name} is not answered yet: write it where it says # YOUR CODE HERE, then run that cell again"


def raises_stub(tree: ast.AST) -> bool:
    """Whether ``tree`` has a ``raise NotImplementedError`` statement (the release's stub)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                return True
    return False


WORDS = {ast.Import: "`import`", ast.ImportFrom: "`import`", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
         ast.Lambda: "`lambda`", ast.FunctionDef: "a nested `def`", ast.AsyncFunctionDef: "a nested `def`",
         ast.ClassDef: "`class`", ast.With: "`with`", ast.AsyncWith: "`with`", ast.Try: "`try`",
         ast.Raise: "`raise`", ast.Yield: "`yield`", ast.YieldFrom: "`yield`", ast.Await: "`await`",
         ast.Delete: "`del`", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
         ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension", ast.List: "a list",
         ast.Dict: "a dict", ast.Set: "a set", ast.JoinedStr: "an f-string", ast.NamedExpr: "`:=`",
         ast.Starred: "`*` unpacking", ast.Match: "`match`", ast.AnnAssign: "an annotation",
         ast.AsyncFor: "`async for`"}
if hasattr(ast, "TryStar"):
    WORDS[ast.TryStar] = "`try`"
STATEMENTS_AND_EXPRESSIONS = (ast.Assign, ast.AugAssign, ast.Expr, ast.If, ast.For, ast.While, ast.Break, ast.Continue,
                              ast.Pass, ast.Return, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp,
                              ast.Subscript, ast.Tuple, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.cmpop,
                              ast.boolop)
"""The syntax both whitelists allow (each may add a little)."""


def chain(node) -> list[str] | None:
    """['cuda', 'threadIdx', 'x'] for ``cuda.threadIdx.x``; None unless it ends in a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def one_function(name: str, source, language: str, max_source: int,
                 max_nodes: int) -> tuple[ast.Module, ast.FunctionDef]:
    """(tree, its one ``def``) of a kernel's source as the student's kernel sent it; Refused
    unless it is text of at most ``max_source`` characters and ``max_nodes`` syntax nodes that
    parses to exactly one plain function definition, Unanswered when it still raises the
    release's stub (before anything else it uses is judged). ``language``: "CUDA" or "Triton"."""
    if type(source) is not str or not source.strip():
        decorator = "@cuda.jit" if language == "CUDA" else "@triton.jit"
        raise Refused(f"{name} is a {language} kernel whose source the grader could not read (define it in a cell "
                      f"with def and {decorator})")
    if len(source) > max_source:
        raise Refused(f"{name} has {len(source)} characters of source; a graded kernel may have {max_source}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"the source of {name} does not parse: {str(exc)[:200]}") from None
    if sum(1 for _ in ast.walk(tree)) > max_nodes:
        raise Refused(f"{name} is too long for a graded kernel (more than {max_nodes} syntax nodes)")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise Refused(f"the source of {name} is not one plain function definition")
    if raises_stub(tree):
        raise Unanswered(unanswered_text(name))
    return tree, tree.body[0]


class WhitelistCheck(ast.NodeVisitor):
    """Walks one function body in source order; raises Refused at the first node whose type is
    not in :attr:`ALLOWED` (named with :attr:`WORDS`), or that a subclass's visitor refuses.
    ``free`` collects the names taken from outside ({name: called?})."""

    ALLOWED: tuple = STATEMENTS_AND_EXPRESSIONS
    WORDS: dict = WORDS
    WHO = "a kernel"          # "..., which {WHO} may not"
    RULE = ""                 # the whole vocabulary in one sentence, said when nothing more precise is

    def __init__(self, name: str, params: set, stored: set):
        self.name, self.params, self.stored = name, params, stored
        self.free: dict[str, bool] = {}

    def refuse(self, node, what: str, why: str = "") -> None:
        line = getattr(node, "lineno", None)
        where = f" (line {line})" if line else ""
        raise Refused(f"{self.name} uses {what}, which {self.WHO} may not{where}: {why or self.RULE}")

    def generic_visit(self, node):
        if not isinstance(node, self.ALLOWED):
            self.refuse(node, self.WORDS.get(type(node), f"`{type(node).__name__}`"))
        super().generic_visit(node)
