"""Running dprelease as a service: data snapshots cut by date and versioned with DVC, a retrain's run
folder, the private privacy ledger, the promotion gates and protocol, the MLflow model registry (a pyfunc
wrapper over ``predict``), and the supervisor of ``make serve``'s Prefect processes. ``flows/retrain.py``
and ``flows/serve.py`` wrap these in Prefect flows and a command line."""
