"""The TileLang language server and ``tilelang-check``.

This package must stay cheap to import: the checker's worker process starts from it, and the
CLI starts that worker before it imports anything heavy.
"""
