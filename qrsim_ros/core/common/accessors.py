"""Read-only properties the models share: a copy of an internal array, a value forwarded from a part.

A model's state arrays are its own: what a property hands out is a copy, so a caller can never change
the model through it (``copy_of``). A composite exposes some values of its parts, or of its parameters,
unchanged (``forwarded``). Both make ordinary read-only ``property`` objects (assignment raises
AttributeError) with the given docstring, which states units and frames as any property's would.
"""

from __future__ import annotations

from operator import attrgetter


def copy_of(attribute: str, doc: str) -> property:
    """A read-only property returning ``getattr(self, attribute).copy()`` (``attribute`` may be dotted,
    e.g. ``"_error.state"``)."""
    get = attrgetter(attribute)
    return property(lambda self: get(self).copy(), doc=doc)


def forwarded(attribute: str, doc: str) -> property:
    """A read-only property returning ``getattr(self, attribute)`` unchanged (``attribute`` may be dotted,
    e.g. ``"params.on"``)."""
    return property(attrgetter(attribute), doc=doc)
