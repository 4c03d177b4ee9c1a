"""What every settings section shares: reading its variables (with their older names),
stripping whitespace, hiding secrets, the one error format naming the variable, and the
field validators several sections use (a list read by its parser, a base URL without its
trailing slash, a choice in any case, the length a shared token needs).
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SecretStr,
    ValidationError,
    model_validator,
)

from delivery_pipeline.settings.urls import carries_credentials, passwords_in

# DELIVERY_INTERNAL_TOKEN and WHATSAPP_VERIFY_TOKEN at least: shorter is guessable, and
# too short to be told apart from ordinary text when logs are scrubbed of secrets.
SHARED_TOKEN_MIN_LENGTH = 16


class SettingsError(ValueError):
    """One or more settings have bad values; the message names each variable."""


def env(name: str) -> Any:
    """Field metadata: this field is read from ``name`` instead of prefix + field name."""
    return {"env": name}


def formerly(*names: str) -> Any:
    """Field metadata: the field's older variable names, still read when its own is unset
    (a rename must not break a deployment's environment)."""
    return {"formerly": list(names)}


class Section(BaseModel):
    """A group of settings sharing a variable prefix."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    env_prefix: ClassVar[str] = ""
    # Secrets kept as text, not SecretStr (declare them ``Field(repr=False)``):
    # treated as every other secret, in errors, in ``effective`` and in Dagster.
    text_secrets: ClassVar[frozenset[str]] = frozenset()
    # The fields whose value came from an environment variable.
    _from_environment: frozenset[str] = PrivateAttr(default=frozenset())

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Field name → environment variable."""
        names = {}
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra
            explicit = extra.get("env") if isinstance(extra, dict) else None
            names[name] = str(explicit) if explicit else cls.env_prefix + name.upper()
        return names

    @classmethod
    def env_aliases(cls) -> dict[str, tuple[str, ...]]:
        """Field name → its older variable names (``formerly``), for the renamed fields."""
        aliases = {}
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra
            older = extra.get("formerly") if isinstance(extra, dict) else None
            if isinstance(older, list):
                aliases[name] = tuple(str(variable) for variable in older)
        return aliases

    @classmethod
    def secret_fields(cls) -> frozenset[str]:
        """The fields that always hold a secret."""
        return cls.text_secrets | frozenset(
            name for name, info in cls.model_fields.items() if "SecretStr" in str(info.annotation)
        )

    def hidden_fields(self) -> frozenset[str]:
        """The fields whose values are never shown: the secrets, and any URL with a password."""
        return self.secret_fields() | frozenset(
            name for name, value in self if carries_credentials(value)
        )

    @model_validator(mode="before")
    @classmethod
    def _strip(cls, values: Any) -> Any:
        """Surrounding whitespace is never part of a value (``echo token > file`` adds a
        newline); the one place every section and every resource built on one passes."""
        if not isinstance(values, dict):
            return values
        return {name: _stripped(value) for name, value in values.items()}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """The section from ``environ``; an unset or empty variable keeps its default. A
        renamed field reads its own variable first, then its older names."""
        aliases = cls.env_aliases()
        values = {}
        for field, variable in cls.env_names().items():
            for name in (variable, *aliases.get(field, ())):
                if environ.get(name, "").strip():
                    values[field] = environ[name]
                    break
        section = cls.model_validate(values)
        section._from_environment = frozenset(values)
        return section

    @property
    def from_environment(self) -> frozenset[str]:
        """The fields set from an environment variable (not defaults, not code)."""
        return self._from_environment

    def secret_texts(self) -> dict[str, str]:
        """Each secret text this section holds → the variable it came from: the hidden
        values whole, and a URL's or connection string's password alone."""
        names = self.env_names()
        texts: dict[str, str] = {}
        for name in self.hidden_fields():
            value = getattr(self, name)
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if not text:
                continue
            texts[text] = names[name]
            for password in passwords_in(text):
                texts[password] = f"{names[name]} password"
        return texts

    def effective(self) -> dict[str, Any]:
        """Every value, secrets shown only as whether they are set."""
        hidden = self.hidden_fields()
        return {
            name: ("(set)" if value is not None else None) if name in hidden else value
            for name, value in self.model_dump().items()
        }


def _stripped(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, SecretStr):
        return SecretStr(value.get_secret_value().strip())
    return value


def describe(section: type[Section], exc: ValidationError) -> Iterator[str]:
    names = section.env_names()
    aliases = section.env_aliases()
    hidden = section.secret_fields()
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "?"
        variable = names.get(field, field)
        if field in aliases:
            variable += f" (or {' / '.join(aliases[field])})"
        given = error.get("input")
        whole = not error["loc"]  # the model's own check: its input is every field
        message = error["msg"].removeprefix("Value error, ")
        if whole:
            yield message  # it names its variables itself
            continue
        shown = "" if field in hidden or carries_credentials(given) else f" (got {given!r})"
        yield f"{variable}: {message}{shown}"


# ── field validators several sections use: field_validator("name")(validator) ──


def parsed_by(parse: Callable[[str], object]) -> Callable[[Any], Any]:
    """A setting holding a list in text (``parsing.py``) is valid when ``parse`` reads it,
    whose ``ValueError`` is the message (never a secret's value); the field keeps the
    text, parsed again where it is used. Unset (``None``) is valid."""

    def valid(value: Any) -> Any:
        if value is not None:
            parse(value.get_secret_value() if isinstance(value, SecretStr) else value)
        return value

    return valid


def without_trailing_slash(value: str | None) -> str | None:
    """A base URL as paths are joined onto it (each path brings its own slash)."""
    return value.rstrip("/") if value else value


def lower_case(value: Any) -> Any:
    """A choice in any case (``mode="before"``: before it is checked against the choices)."""
    return value.strip().lower() if isinstance(value, str) else value


def long_enough(value: SecretStr | None) -> SecretStr | None:
    """A shared token of at least ``SHARED_TOKEN_MIN_LENGTH`` characters (a validator)."""
    if isinstance(value, SecretStr) and len(value.get_secret_value()) < SHARED_TOKEN_MIN_LENGTH:
        raise ValueError(
            f"must be at least {SHARED_TOKEN_MIN_LENGTH} characters (use a long random string, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return value
