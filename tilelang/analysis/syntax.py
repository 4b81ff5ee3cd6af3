"""One parse per text: the ``ast`` of a source text and its indices, shared by every check.

A file is read by several parts of the checker for one check: the file model
(``source.parse_file``), the span lookup of every built kernel (``report.SourceIndex``), the
language server's build-cache keys, the pragma and ignore-comment scans. They all start here, so
a text is parsed, walked and tokenized once however many of them read it.

Contract:
- ``syntax_tree(text, filename)`` returns the ``SyntaxTree`` of ``text``. Results are cached per
  text (the last ``CACHE_SIZE`` texts; the key is the text itself, so its hash, then equality);
  the tree, its node lists and everything derived from them are shared and must be treated as
  read-only. A ``SyntaxError`` (``ValueError`` for NUL bytes) propagates, with ``filename`` in it,
  and is not cached. ``filename`` does not change the tree.
- ``SyntaxTree.nodes`` lists every node in ``ast.walk`` order (breadth first); ``parents[i]`` is
  the index of the parent of ``nodes[i]`` (-1 for the module), ``owners[i]`` the index in
  ``tree.body`` of the module-level statement containing it (-1 for the module itself).
  ``of_type(kind)`` lists the indices of the nodes of one exact type, in that order.
- ``directive_comments(text)``: the ``tokenize`` COMMENT tokens of ``text`` when the text contains
  ``tilelang\\s*:`` anywhere, else ``()`` without tokenizing (a ``# tilelang: ...`` directive
  cannot be in such a text); ``()`` too when the text cannot be tokenized. Cached per text.
  Directive patterns that use it must require ``DIRECTIVE_HINT`` to match.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import threading
import tokenize
from collections import OrderedDict

CACHE_SIZE = 8
DIRECTIVE_HINT = re.compile(r"tilelang\s*:")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class SyntaxTree:
    """The parse of one text and its walk order (see the module docstring)."""

    def __init__(self, text: str, tree: ast.Module):
        self.text, self.tree = text, tree
        self.nodes, self.parents, self.owners = _walk(tree)
        self._types = None
        self._names = None

    def of_type(self, kind: type) -> list:
        """Indices of the nodes whose type is exactly ``kind``, in walk order."""
        if self._types is None:
            types = {}
            for i, node in enumerate(self.nodes):
                types.setdefault(type(node), []).append(i)
            self._types = types
        return self._types.get(kind, [])

    def names_by_statement(self) -> list:
        """For each module-level statement, the set of ``ast.Name`` ids it reads or writes."""
        if self._names is None:
            names = [set() for _ in self.tree.body]
            nodes, owners = self.nodes, self.owners
            for i in self.of_type(ast.Name):
                names[owners[i]].add(nodes[i].id)
            self._names = [frozenset(n) for n in names]
        return self._names

    def scope_of(self, index: int) -> int:
        """Index of the innermost function definition around node ``index`` (0: the module)."""
        parent = self.parents[index]
        while parent > 0 and not isinstance(self.nodes[parent], _FUNCTIONS):
            parent = self.parents[parent]
        return max(parent, 0)


def _walk(tree: ast.Module):
    """(nodes, parents, owners) in ``ast.walk`` order, in one pass."""
    body = list(tree.body)
    nodes = [tree, *body, *tree.type_ignores]
    parents = [-1] + [0] * (len(nodes) - 1)
    owners = [-1, *range(len(body))] + [-1] * len(tree.type_ignores)
    add_node, add_parent, add_owner, AST = nodes.append, parents.append, owners.append, ast.AST
    i = 1
    while i < len(nodes):
        node, owner = nodes[i], owners[i]
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                add_node(value), add_parent(i), add_owner(owner)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        add_node(item), add_parent(i), add_owner(owner)
        i += 1
    return nodes, parents, owners


_trees: OrderedDict = OrderedDict()
_lock = threading.Lock()


def syntax_tree(text: str, filename: str = "<unknown>") -> SyntaxTree:
    """The shared ``SyntaxTree`` of ``text`` (see the module docstring)."""
    with _lock:
        found = _trees.get(text)
        if found is not None:
            _trees.move_to_end(text)
            return found
    found = SyntaxTree(text, ast.parse(text, filename=filename))
    with _lock:
        _trees[text] = found
        while len(_trees) > CACHE_SIZE:
            _trees.popitem(last=False)
    return found


def directive_comments(text: str) -> tuple:
    """COMMENT tokens of ``text`` that may hold a ``tilelang:`` directive (module docstring)."""
    if DIRECTIVE_HINT.search(text) is None:
        return ()
    return _comments(text)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _comments(text: str) -> tuple:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return ()
    return tuple(tok for tok in tokens if tok.type == tokenize.COMMENT)
