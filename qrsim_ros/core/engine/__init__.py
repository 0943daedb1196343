"""The engine that composes the models: the in-process ``Simulator``."""
