"""Prefect tasks: thin wrappers that call the stage functions of ``dprelease.stages``."""
