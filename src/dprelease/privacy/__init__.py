"""Privacy building blocks shared by the mechanisms: the guarantee record, RDP → (ε, δ) conversions,
and Liu–Talwar private selection. No mechanism-specific code lives here."""
