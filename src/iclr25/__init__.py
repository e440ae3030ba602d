"""iclr25: faithful, tested, offline implementations of ICLR 2025 methods.

Importing the package loads no method and does no I/O; see ``iclr25 list``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
