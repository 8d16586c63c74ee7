"""Gaussian Privacy Protector (docs/algorithms.md, G): sanitized representations that keep a utility attribute and hide a
sensitive one; centralized (Algorithm 1) and on Flower (Algorithm 2). Its plug-in (``plugin.PLUGIN``) holds
its params section, stages, flow, tracking hook and sanitizer."""
