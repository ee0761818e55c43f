"""MiniMalloc-style pack search: the search (:mod:`.search`) and its solver wrapper (:mod:`.solver`)."""
