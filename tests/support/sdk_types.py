"""Valid values of the installed SDKs' own types, for conformance tests.

:func:`members` lists the models of a union type (``anthropic.types.beta.BetaContentBlock``:
every content block type the installed package knows), and :func:`sample` makes a JSON value
that has a model's shape, every field set (optional ones too, so a test sees the fields a
proxy might drop), built from the model's annotations alone.
"""

from __future__ import annotations

import datetime
import enum
import types
import typing
from typing import Any

import pydantic

# a recursive type's value stops growing here: below, optional fields are left out
_DEPTH = 5


def members(union: Any) -> list[type[pydantic.BaseModel]]:
    """The models a (possibly annotated, nested) union is made of, in order."""
    if isinstance(union, type) and issubclass(union, pydantic.BaseModel):
        return [union]
    found: list[type[pydantic.BaseModel]] = []
    for arm in typing.get_args(union):
        for model in members(arm):
            if model not in found:
                found.append(model)
    return found


def type_tag(model: type[pydantic.BaseModel]) -> str:
    """The ``type`` literal a model is tagged with."""
    (tag,) = typing.get_args(model.model_fields["type"].annotation)
    return str(tag)


def fields_of(model: type[pydantic.BaseModel]) -> list[str]:
    """A model's field names as they are spelled in JSON."""
    return [field.alias or name for name, field in model.model_fields.items()]


def sample(annotation: Any, depth: int = 0) -> Any:
    """A JSON value of type ``annotation``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return None
    if origin is typing.Annotated:
        return sample(args[0], depth)
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Union or origin is types.UnionType:
        arms = [arm for arm in args if arm is not type(None)]
        return sample(arms[0], depth) if arms else None
    if origin in (list, tuple, set, frozenset) or (
        origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")
    ):
        return [sample(args[0], depth + 1)] if args and depth < _DEPTH else []
    if origin is dict or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        return {}
    if isinstance(annotation, type):
        if issubclass(annotation, pydantic.BaseModel):
            return {
                field.alias or name: sample(field.annotation, depth + 1)
                for name, field in annotation.model_fields.items()
                if depth < _DEPTH or field.is_required()
            }
        if issubclass(annotation, bool):
            return True
        if issubclass(annotation, enum.Enum):
            return next(iter(annotation)).value
        if issubclass(annotation, int):
            return 1
        if issubclass(annotation, float):
            return 1.5
        if issubclass(annotation, str):
            return "x"
        if issubclass(annotation, datetime.datetime):
            return "2026-01-01T00:00:00Z"
    return {}  # object, Any, and what this does not know: an empty object
