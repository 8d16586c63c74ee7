"""Privacy building blocks shared by the mechanisms: the guarantee record, RDP → (ε, δ) conversions,
Liu–Talwar private selection, the randomness key (``secret``) and the
check that a run's keys are those recorded (``key_guard``). No mechanism-specific code lives here."""
