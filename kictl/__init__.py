"""kictl: the command-line tool of KernelIndex, an index of GPU-kernel benchmark results."""

__version__ = "0.3.2"
