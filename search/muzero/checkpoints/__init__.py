"""Trained mallocMuZero checkpoints shipped with the package.

``default.pt``: what ``--solver muzero`` loads (the guided search's prior, features ``encoder/2``): ``xla21``,
cur159 trained on for 130 more games with XLA-compiled programs of random architecture in the curriculum
(issue 21 item 3; experiments/README.md, "Training on XLA-compiled programs"). ``cur159.pt``: the default before it
(experiments/results/muzero_expert_training.md), kept so the records made with it replay; ``value.pt``'s
other weights are its. ``selfplay.pt``: the earlier Gumbel self-play network
on the plain observation, the default of ``model=learned|simulator`` and ``method=gumbel|puct``
(experiments/results/muzero_training.md; why ``model=learned`` has no network of its own:
experiments/results/muzero_learned_arm.md). ``prefetch.pt``: the policy network of the prefetch game
(issue 21 item 3; ``experiments/train_prefetch_net.py``, docs/training.md "The prefetch network"), read by
``--solver muzero`` in prefetch mode with ``checkpoint=`` its path (solvers/muzero.py says when it is the default).
"""
