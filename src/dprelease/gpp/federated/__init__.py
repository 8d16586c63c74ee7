"""The distributed GPP as Flower apps. The only place in the package allowed to import ``flwr``.
Reserved: not implemented yet."""
