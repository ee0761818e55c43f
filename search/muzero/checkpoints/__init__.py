"""Trained mallocMuZero checkpoints shipped with the package.

``default.pt``: what ``--solver muzero`` loads (the guided search's prior, features ``encoder/2``): ``xla21``,
cur159 trained on for 130 more games with XLA-compiled programs of random architecture in the curriculum
(docs/training.md; how it was trained and chosen: docs/results.md, "muzero's defaults"). ``cur159.pt``: the
network xla21 was trained from, which the records made with it replay; ``value.pt``'s other weights are its.
``selfplay.pt``: the Gumbel self-play network on the plain observation, the default of
``model=learned|simulator`` and ``method=gumbel|puct``. ``prefetch.pt``: the policy network of the prefetch game
(``experiments/train_prefetch_net.py``, docs/training.md "The prefetch network"), read by
``--solver muzero`` in prefetch mode with ``checkpoint=`` its path (solvers/muzero.py says when it is the default).
``encoder3.pt``: default.pt's network with a learned graph encoder in place of its fixed encoding (features
``encoder/3``, docs/training.md "A learned graph encoder"), started from default.pt and trained 57 games; read by
``--solver muzero`` with ``checkpoint=`` its path (``GRAPH_CHECKPOINT``; docs/results.md, "muzero's defaults").
"""
