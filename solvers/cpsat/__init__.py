"""CP-SAT solver package: the model (:mod:`.model`), the solver (:mod:`.solver`) and prefetch mode's
copy windows (:mod:`.prefetch_windows`)."""
