"""The public model's guarantee kind: ``public_only`` — it reads no private report, so ε = 0 with respect to every
report of the extract, for every pair of neighbouring extracts (a worst-case claim). Its released test figures, when
it is the release, are a Gaussian mechanism of their own (a ``dp_accountant`` record). Declarations only."""

from __future__ import annotations

from dprelease.contracts.mechanism import Kind


def _sentence(g: dict) -> str:
    return (
        "Reads no private report: trained on the published earlier period only, so ε = 0 with respect to the "
        "reports of the agency's extract (worst case over neighbouring extracts)."
    )


def _check(q: dict) -> str | None:
    return None if q.get("private_reports_read", 0) == 0 else "a public_only model reads no private report"


KINDS = (
    Kind(
        "public_only",
        "reads no private report: ε = 0 with respect to the extract's reports",
        True,
        _sentence,
        check=_check,
        worst_case=True,
        floor=True,
    ),
)
