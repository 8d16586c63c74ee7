"""The release: what leaves the agency and what a partner runs on it (folder, checks, signing, keys, card, sanitizers).
This ``__init__`` imports nothing, so importing ``signing`` never loads torch.

See docs/release.md, "Notes from the code", `core/release/__init__.py`."""
