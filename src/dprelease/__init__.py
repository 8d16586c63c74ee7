"""dprelease: release text classifiers trained on confidential records with a stated privacy guarantee."""

__version__ = "0.1.0"
