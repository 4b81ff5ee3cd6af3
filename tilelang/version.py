"""The package version, on the ground floor so that any layer (the autotuner's result keys) can
read it without importing the ``tilelang`` front door."""

__version__ = "0.1.0"
