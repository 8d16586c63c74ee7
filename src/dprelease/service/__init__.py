"""Running dprelease as a service: data snapshots cut by date, the private privacy ledger, the promotion
gates and the MLflow model registry (a pyfunc wrapper over ``predict``). Used by ``flows/retrain.py``."""
