"""DP-SGD's plug-in (Opacus): its stages (its arm is in :mod:`.params`): one model at the declared target ε
(``dpsgd.target_epsilon``), its δ sweep, the release at ``released.epsilon`` (when ``released.mechanism: dpsgd``)
and the preflight every flow that plans its stages runs (the declared target, batch size vs data size, δ range)
before any training."""

from dprelease.contracts.mechanism import Mechanism
from dprelease.mechanisms.dpsgd import stages


def check(params, root) -> None:
    stages.check_dpsgd(params, n=stages.preview_train_size(params, root))


PLUGIN = Mechanism(name="dpsgd", declare=stages.declare, check=check, release=stages.SPEC)
