"""The package version, in one place: ``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``) and
``pyconvtbc.__version__`` / ``pyconvtbc --version`` report it."""
__version__ = "0.1.0"
