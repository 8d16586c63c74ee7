"""Gaussian Privacy Protector (sanitized representations keeping a utility attribute, hiding a
sensitive one). Reserved: not implemented yet (see the README's feature table)."""
