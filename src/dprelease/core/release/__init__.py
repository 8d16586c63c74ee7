"""The release: what leaves the agency and what a partner runs on it, in one package.

* ``folder`` — the classifier release folder, ``publish`` and ``predict`` (:class:`folder.Coder`); ``classifier`` —
  its verification, without torch for a head release (``dprelease verify``);
* ``check`` — the file-level checks every release kind shares (allow-list, manifest hashes, the architecture's
  tensors; the bounded reading of each file is :mod:`dprelease.core.untrusted`'s): imports neither the backends nor ``folder``;
* ``signing`` — the agency key (Ed25519) and the release signature; ``keys_cli`` (``dprelease key``),
  ``key_transfer`` (private keys for a second operator); whether a release's keys are the recorded ones is
  :mod:`dprelease.core.privacy.key_guard` (the ``secret`` stage checks it too);
* ``verify`` — ``dprelease verify`` and the re-signing key rotation does;
* ``card`` — the model card, rendered from the manifest's guarantee record and public aggregates;
* ``sanitizer`` — sanitizer releases and ``dprelease sanitize``; ``outputs`` — what predict and sanitize may write.

This ``__init__`` imports nothing: importing ``dprelease.core.release.signing`` never loads torch through ``folder``.
"""
