"""mallocMuZero: MuZero-guided tree search for the mallocGame (docs/architecture.md, "The game").

The agent of arXiv 2305.07440 ("Optimizing Memory Mapping Using Deep Reinforcement
Learning"), built on MuZero (Schrittwieser et al. 2020) and Gumbel MuZero (Danihelka et
al. 2022). Modules, one concern each:

* :mod:`mallocgame.search.muzero.features`   -- observations as fixed-shape numpy arrays (no torch);
* :mod:`mallocgame.search.muzero.networks`   -- the PyTorch networks h, g and f;
* :mod:`mallocgame.search.muzero.search`     -- pUCT / Gumbel tree search over any :class:`Model` (numpy);
* :mod:`mallocgame.search.muzero.models`     -- the two search models: learned dynamics (MuZero) and
  the true simulator with network priors and values (AlphaZero);
* :mod:`mallocgame.search.muzero.problems`   -- seeded recipes of training problems;
* :mod:`mallocgame.search.muzero.replay`     -- trajectories, the replay buffer and n-step targets;
* :mod:`mallocgame.search.muzero.selfplay`   -- one game played by the agent;
* :mod:`mallocgame.search.muzero.train`      -- the unrolled MuZero loss and the training loop;
* :mod:`mallocgame.search.muzero.checkpoint` -- atomic save / load / resume.

Nothing here imports torch at package import time: only ``networks`` (and what uses it)
does, and those are imported lazily by the solver and the ``train`` command.
"""

DEFAULT_CHECKPOINT_ENV = "MALLOCGAME_MUZERO_CHECKPOINT"
