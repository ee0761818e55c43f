"""CP-SAT solver package: the model (:mod:`.model`), its deadline-safe starts (:mod:`.fallback`) and the solver (:mod:`.solver`)."""
