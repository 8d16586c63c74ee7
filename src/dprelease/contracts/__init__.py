"""The floor below core: what every floor above declares itself with (stages, plug-ins, the layout, the
plug-in list) and how its code is scoped and hashed. Imports nothing of dprelease."""
