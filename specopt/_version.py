"""The package version (one place; ``specopt.__version__`` and the progress banner read it)."""

__version__ = "0.1.0"
