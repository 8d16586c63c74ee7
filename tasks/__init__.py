"""Prefect tasks: one cached task per stage of the registry (``dprelease.pipeline.registry``)."""
