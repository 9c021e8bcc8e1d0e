"""Traffic shapes: a registry, one module each, run as one wave per shape in registry order.

A shape builds its own items (own sessions, own needles) from a :class:`ShapeContext` and says
how its wave sends them. A third party adds one with :meth:`ShapeRegistry.register`.
"""

from __future__ import annotations

from batchprobe.errors import ConfigError
from batchprobe.workload.shapes import (
    aborts,
    burst,
    conversation,
    early,
    join,
    params,
    ragged,
    repeat,
)
from batchprobe.workload.shapes._types import (
    AfterFinish,
    AfterStart,
    AfterTokens,
    BiasToken,
    HangUp,
    Send,
    Shape,
    ShapeContext,
    ShapePlan,
    Trigger,
)


class ShapeRegistry:
    """Shapes by name, in the order their waves run."""

    def __init__(self, shapes: list[Shape] | None = None) -> None:
        self._shapes: dict[str, Shape] = {}
        for shape in shapes or []:
            self.register(shape)

    def register(self, shape: Shape) -> None:
        if shape.name in self._shapes:
            raise ValueError(f"shape {shape.name!r} is registered already")
        self._shapes[shape.name] = shape

    @property
    def names(self) -> list[str]:
        return list(self._shapes)

    def get(self, name: str) -> Shape:
        shape = self._shapes.get(name)
        if shape is None:
            raise ConfigError("shapes", f"unknown shape {name!r}; allowed: {', '.join(self.names)}")
        return shape

    def parse(self, text: str) -> list[str]:
        """``--shapes burst,join``: validated names, in registry (wave) order."""
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            raise ConfigError("shapes", f"got {text!r}; allowed: {', '.join(self.names)}")
        for name in names:
            self.get(name)
        return [n for n in self.names if n in names]


def default_shapes() -> ShapeRegistry:
    return ShapeRegistry(
        [
            burst.SHAPE,
            join.SHAPE,
            ragged.SHAPE,
            early.SHAPE,
            repeat.SHAPE,
            params.SHAPE,
            conversation.SHAPE,
            aborts.SHAPE,
        ]
    )


SHAPE_NAMES: tuple[str, ...] = tuple(default_shapes().names)

__all__ = [
    "SHAPE_NAMES",
    "AfterFinish",
    "AfterStart",
    "AfterTokens",
    "BiasToken",
    "HangUp",
    "Send",
    "Shape",
    "ShapeContext",
    "ShapePlan",
    "ShapeRegistry",
    "Trigger",
    "default_shapes",
]
