"""What a run may be told when it is launched: plain values, never a variable of its
environment.

Dagster's typed config (``dg.Config``) reads every ``str``, ``int`` and ``bool``
field as a *source*: ``{"env": "NAME"}`` typed into the launchpad becomes the
run worker's variable ``NAME``. A launchpad user could then read any variable
of the run: a token approved as a document's edited body goes out on WhatsApp,
a database URL given as a person's reference comes back in the error. So an
op's config is declared here with Dagster's plain scalars (``String``, ``Int``,
``Float``, ``Bool``), which take a literal only, built from a pydantic model
that then parses what the op was given: one definition for the schema, the
defaults, the descriptions and the checks.

A resource has no config at all (``resources.py``: ``NO_CONFIG``), and
neither has the IO manager (``fixed_io_manager``).
"""

import types
from typing import Any, TypeVar, Union, get_args, get_origin

import dagster as dg
from pydantic import BaseModel, ConfigDict

# Nothing may be configured: any key is refused ("Received unexpected config entry").
NO_CONFIG: dict[str, Any] = {}

_PLAIN: dict[type, Any] = {str: dg.String, int: dg.Int, float: dg.Float, bool: dg.Bool}


class OpConfig(BaseModel):
    """An op's config: a flat model of ``str``, ``int``, ``float``, ``bool`` (or None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


C = TypeVar("C", bound=OpConfig)


def _plain_type(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(inner) == 1 and len(get_args(annotation)) == 2:
            return dg.Noneable(_plain_type(inner[0]))
    if annotation in _PLAIN:
        return _PLAIN[annotation]
    raise TypeError(f"{annotation!r} is not a plain config value (str, int, float, bool)")


def plain_config(model: type[OpConfig]) -> dict[str, dg.Field]:
    """The Dagster config schema of ``model``: each field a plain scalar, required when
    the model requires it, else with the model's default."""
    fields = {}
    for name, info in model.model_fields.items():
        kind = _plain_type(info.annotation)
        if info.is_required():
            fields[name] = dg.Field(kind, description=info.description)
        else:
            fields[name] = dg.Field(
                kind, is_required=False, default_value=info.default, description=info.description
            )
    return fields


def parsed(model: type[C], given: Any) -> C:
    """What the op was given (``context.op_config``), checked by ``model``."""
    return model.model_validate(given or {})


@dg.io_manager(
    config_schema=NO_CONFIG,
    description="Dagster's filesystem IO manager, under the instance's storage directory.",
)
def fixed_io_manager(context: dg.InitResourceContext) -> dg.IOManager:
    """Dagster's own filesystem IO manager with no config: its ``base_dir`` would take
    ``{"env": …}`` and write a run's outputs under, and show in the run's events, the
    variable's value."""
    return dg.FilesystemIOManager().create_io_manager(context)
