"""The public model as a mechanism (docs/guarantees.md, "Public first"): softmax regression on the published
earlier period only. It reads no private report (ε = 0 with respect to them): the floor of the frontier, and a
release the agency may declare (``released.mechanism: public_only``)."""
