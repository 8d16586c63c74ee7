"""The offline switches, in one place: nothing may fetch weights or data from a hub at run time.

Imported (for its effect) by the encoder module and every entry point before ``transformers`` loads.
"""

from __future__ import annotations

import os
import warnings

SWITCHES = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def apply() -> None:
    """Set the offline switches (an explicit environment value wins)."""
    for key, value in SWITCHES.items():
        os.environ.setdefault(key, value)


def quiet() -> None:
    """Offline switches plus quiet libraries, for command-line entry points."""
    apply()
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


apply()
