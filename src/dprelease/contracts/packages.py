"""The packages that make up this dprelease, in execution order: the ONE list a new mechanism is added to
(read through :data:`dprelease.contracts.plugins.PACKAGES`).

Configuration, not code: no stage's code scope holds this file (:func:`dprelease.contracts.code_scope.closure`), as none
holds another package's ``params`` module. What a stage reads of the list is the ``Params`` schema its validated
values come from, and those values are hashed in its cache key already; so adding a mechanism here changes no
other stage's key, ``dvc.yaml`` or ``dvc.lock``. The import-graph analysis reads the list from this source
(:func:`dprelease.contracts.code_scope.listed_packages`): keep it one literal tuple.
"""

PACKAGES = (
    "dprelease.core.privacy",
    "dprelease.core.data",
    "dprelease.mechanisms.nonprivate",  # before SWAG-PPM: the arms' default order (rows of the reports) follows this list
    "dprelease.mechanisms.swag_ppm",
    "dprelease.mechanisms.public_only",  # the public model: the frontier's floor and DP-SGD's start
    "dprelease.mechanisms.dpsgd",
    "dprelease.mechanisms.ncm",
    "dprelease.mechanisms.linear_ppm",
    "dprelease.core.release",  # the shared publish step: signs the declared mechanism's staged release (released.mechanism)
    "dprelease.compare.reports",
    "dprelease.compare.frontier",  # after every mechanism whose points it reads (their params modules' FRONTIER)
    "dprelease.mechanisms.nvdp",
    "dprelease.compare.mia",  # the audit package: after every arm it audits (its NVDP arm reads NVDP's scores)
    "dprelease.mechanisms.gpp",
)
