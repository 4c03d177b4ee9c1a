"""``Settings.review`` (``REVIEW_*``): the review page's sign-in, the reviewers'
channel and how long a document may await review."""

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from delivery_pipeline.settings.parsing import REVIEW_TOKEN_MIN_LENGTH, parse_person_tokens
from delivery_pipeline.settings.section import Section, env, lower_case
from delivery_pipeline.settings.urls import secret


class ReviewSettings(Section):
    """The review page's sign-in (reviewers, and operators who may also cancel and
    resend), the reviewers' channel, how long a document may wait."""

    env_prefix: ClassVar[str] = "REVIEW_"

    token: SecretStr | None = Field(
        None,
        description=(
            "the review page's shared sign-in token for reviewers (at least 16 characters), who "
            "each give their name; unset (and no REVIEW_TOKENS or OPERATOR_TOKENS): the page "
            "answers 404"
        ),
    )
    tokens: SecretStr | None = Field(
        None,
        description=(
            "name=token, comma-separated: each reviewer's own sign-in token (at least 16 "
            "characters); the name their decisions are kept under comes from the token"
        ),
    )
    operator_tokens: SecretStr | None = Field(
        None,
        json_schema_extra=env("OPERATOR_TOKENS"),
        description=(
            "name=token, comma-separated: who may also cancel and resend any document on the "
            "review page (an operator's right, apart from reviewing); the name comes from the "
            "token"
        ),
    )
    webhook_url: SecretStr | None = Field(
        None,
        description=(
            "the reviewers' Slack-compatible incoming webhook; unset: their alerts go to the ops "
            "channel"
        ),
    )
    warn_seconds: float = Field(
        30 * 60,
        gt=0,
        description=(
            "awaiting_review_too_long: WARN to the reviewers when a document awaits review this "
            "long"
        ),
    )
    error_seconds: float = Field(
        2 * 60 * 60, gt=0, description="awaiting_review_too_long: ERROR, escalated to ops"
    )
    reminder_seconds: int = Field(
        30 * 60,
        ge=1,
        description="the reviewers are reminded this often while documents wait too long",
    )
    sign_in_client_failures: int = Field(
        10,
        ge=1,
        description=(
            "wrong tokens one client may send within the window; then it waits (429) until the "
            "oldest leaves the window"
        ),
    )
    sign_in_failures: int = Field(
        100,
        ge=1,
        description=(
            "wrong tokens from all clients together within the window; then every client that has "
            "not signed in within 30 days waits (429)"
        ),
    )
    sign_in_window_seconds: int = Field(
        15 * 60, ge=1, description="the sliding window both sign-in limits count over"
    )
    cookie_secure: Literal["auto", "always"] = Field(
        "auto",
        description=(
            "auto: the session cookie is Secure when the request came over HTTPS (as a trusted "
            "proxy says); always: always Secure (the page then works only over HTTPS)"
        ),
    )

    _lower = field_validator("cookie_secure", mode="before")(lower_case)

    @field_validator("tokens", "operator_tokens")
    @classmethod
    def _named_tokens(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """Each item name=token; and a token signs in one person with one right (the same
        token twice would make the name or the right a matter of which list is read)."""
        if value is None:
            return value
        tokens = parse_person_tokens(value.get_secret_value())
        taken = {secret(info.data.get("token")) or ""}
        if info.field_name == "operator_tokens":
            taken |= set(parse_person_tokens(secret(info.data.get("tokens")) or ""))
        if set(tokens) & taken:
            raise ValueError(
                "shares a token with REVIEW_TOKEN or REVIEW_TOKENS: give each person, and "
                "the shared reviewer token, a token of their own"
            )
        return value

    def people_by_token(self, *, operators: bool) -> dict[str, str]:
        """Each personal token → the name it signs in (``OPERATOR_TOKENS`` or
        ``REVIEW_TOKENS``)."""
        raw = self.operator_tokens if operators else self.tokens
        return parse_person_tokens(secret(raw) or "")

    @property
    def page_on(self) -> bool:
        """Is any sign-in token configured (else the review page answers 404)?"""
        return any(t is not None for t in (self.token, self.tokens, self.operator_tokens))

    @field_validator("token")
    @classmethod
    def _long_token(cls, value: SecretStr | None) -> SecretStr | None:
        if not isinstance(value, SecretStr):
            return value
        if len(value.get_secret_value().strip()) < REVIEW_TOKEN_MIN_LENGTH:
            raise ValueError(
                f"must be at least {REVIEW_TOKEN_MIN_LENGTH} characters: the review page is "
                "as safe as this token (use a long random string)"
            )
        return value
