"""Install hints that messages give, in one place."""

# PyTorch's CPU build, pinned: an unpinned ``torch`` (or ``pyconvtbc[torch]``, PyPI's Linux wheel) pulls
# multi-GB CUDA libraries.
TORCH_INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu (PyTorch's CPU build)"
