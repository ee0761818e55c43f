"""Trained mallocMuZero checkpoints shipped with the package (``default.pt`` is what ``--solver muzero`` loads)."""
