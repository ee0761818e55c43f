"""CP-SAT solver package: the model (:mod:`.model`), deadline-safe starts (:mod:`.fallback`), the solver (:mod:`.solver`)."""
