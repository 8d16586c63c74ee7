"""Flower reads its telemetry switch on first import: load the package (which sets it) before any test
module imports ``flwr`` itself."""

import dprelease.gpp.federated  # noqa: F401
