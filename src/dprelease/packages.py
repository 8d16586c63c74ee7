"""The packages that make up this dprelease, in execution order: the ONE list a new mechanism is added to
(read through :data:`dprelease.plugins.PACKAGES`).

Configuration, not code: no stage's code scope holds this file (:func:`dprelease.code_scope.closure`), as none
holds another package's ``params`` module. What a stage reads of the list is the ``Params`` schema its validated
values come from, and those values are hashed in its cache key already; so adding a mechanism here changes no
other stage's key, ``dvc.yaml`` or ``dvc.lock``. The import-graph analysis reads the list from this source
(:func:`dprelease.code_scope.listed_packages`): keep it one literal tuple.
"""

PACKAGES = (
    "dprelease.privacy",
    "dprelease.data",
    "dprelease.nonprivate",  # before SWAG-PPM: the arms' default order (rows of the reports) follows this list
    "dprelease.swag_ppm",
    "dprelease.dpsgd",
    "dprelease.ncm",
    "dprelease.linear_ppm",
    "dprelease.release",  # the shared publish step: signs the declared mechanism's staged release (released.mechanism)
    "dprelease.reports",
    "dprelease.frontier",  # after every mechanism whose points it reads (their params modules' FRONTIER)
    "dprelease.nvdp",
    "dprelease.mia",  # the audit package: after every arm it audits (its NVDP arm reads NVDP's scores)
    "dprelease.gpp",
)
