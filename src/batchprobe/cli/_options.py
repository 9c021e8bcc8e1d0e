"""Click options declared from the pydantic models, so bounds and defaults live in one place.

An option made here has no default of its own (None: the model's default applies) and no
bounds (the model checks them and the error names the option); its help shows the model's
description and default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

F = TypeVar("F", bound=Callable[..., Any])


def model_option(model: type[BaseModel], field: str, *decls: str, **kwargs: Any) -> Callable[[F], F]:
    """``--x`` for ``model.field``: the parameter is named after the field, typed, default None."""
    info = model.model_fields[field]
    if info.annotation is bool:
        kwargs.setdefault("is_flag", True)
        kwargs.setdefault("default", None)
    elif "type" not in kwargs and info.annotation in (int, float, int | None, float | None):
        kwargs["type"] = float if info.annotation in (float, float | None) else int
    default = info.get_default(call_default_factory=True)
    help_text = kwargs.pop("help", None) or info.description or ""
    if default is not PydanticUndefined and default is not None and not isinstance(default, bool):
        help_text = f"{help_text} [default: {default}]".strip()
    return click.option(*decls, field, help=help_text, **kwargs)
