"""The ε that comparison arms are matched to: ``dpsgd.target_epsilon``, else the SWAG-PPM release's."""

from __future__ import annotations

from ..config import Params
from ..errors import DataError
from ..io import read_json
from ..layout import Layout
from .guarantee import Guarantee


def compared_epsilon(params: Params, lay: Layout) -> float:
    """The configured target, else the ε of the SWAG-PPM release it is compared with."""
    if params.dpsgd.target_epsilon is not None:
        return params.dpsgd.target_epsilon
    path = lay.metrics / "release.json"
    if not path.is_file():
        raise FileNotFoundError("dpsgd.target_epsilon is not set and there is no SWAG-PPM release to match "
                                "(run the release flow first, or set dpsgd.target_epsilon)")
    try:
        return float(Guarantee.from_dict(read_json(path)["guarantee"]).epsilon)
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(f"{path}: no usable guarantee record with an ε ({type(e).__name__}: {e}); re-run the "
                        "release flow, or set dpsgd.target_epsilon") from None
