"""The offline switches, in one place: nothing may fetch weights or data from a hub at run time.

Imported (for its effect) by the encoder module and every entry point before ``transformers`` loads.
"""

from __future__ import annotations

import os
import sys
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


QUIET = {
    "TRANSFORMERS_VERBOSITY": "error",  # what transformers.logging.set_verbosity_error() sets, read when it loads
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # read (through huggingface_hub) when transformers loads: no progress bars
}


def quiet() -> None:
    """Offline switches plus quiet libraries, for command-line entry points. Imports nothing heavy (a command
    that never loads transformers starts in a fraction of a second): transformers reads :data:`QUIET` from the
    environment when it loads (an explicit value wins), and is quietened directly if it is already loaded."""
    apply()
    warnings.filterwarnings("ignore", category=FutureWarning)
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()


apply()
