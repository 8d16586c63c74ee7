"""Reports built from the stages' public outputs (metrics files, guarantee records, tables): the
comparison report and the tuning report. Reports never import a mechanism package."""
