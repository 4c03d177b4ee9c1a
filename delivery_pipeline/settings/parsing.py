"""The string lists the settings read: templates, times to live, document parameters,
file and review kinds, people's and applications' tokens, webhooks, trusted proxies.

Each parser raises ``ValueError`` with a message naming the item (never a secret's
value); the section validators turn it into a ``SettingsError`` naming the variable.
"""

import re
from urllib.parse import urlsplit

QUIET_HOURS = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$")
# A template created without message_send_ttl_seconds: the platform keeps trying
# to deliver its message for 30 days.
PLATFORM_TTL_SECONDS = 30 * 24 * 3600

# The kinds DELIVERY_REVIEW_KINDS may name: model.Kind's values (settings does
# not import the model; test_model.py holds the two lists together).
REVIEWABLE_KINDS = ("plan", "daily_brief")
REVIEW_TOKEN_MIN_LENGTH = 16


PERSON_NAME_MAX = 100


def parse_person_tokens(raw: str) -> dict[str, str]:
    """``REVIEW_TOKENS`` and ``OPERATOR_TOKENS`` (``name=token,…``) → {token: name}: a
    person may have several tokens (one replacing another), a token one person. Errors
    name the item's position and its name, never a token."""
    people: dict[str, str] = {}
    for position, item in enumerate(filter(None, (p.strip() for p in raw.split(","))), 1):
        name, sep, token = item.partition("=")
        name, token = " ".join(name.split()), token.strip()
        if not sep or not name or not token:
            raise ValueError(f"item {position} is not name=token")
        if len(name) > PERSON_NAME_MAX or not name.isprintable():
            raise ValueError(
                f"item {position}: a name is printable text of at most {PERSON_NAME_MAX} characters"
            )
        _claim_token(people, position, name, token, REVIEW_TOKEN_MIN_LENGTH, "person")
    return people


def _claim_token(
    owners: dict[str, str], position: int, name: str, token: str, least: int, who: str
) -> None:
    """Record ``token`` as ``name``'s in ``owners`` (token → name): a token is long, has
    no spaces, and is one owner's (one may have several: one replacing another). Errors
    name the item's position and its owner, never the token."""
    if len(token) < least or any(c.isspace() for c in token):
        raise ValueError(
            f"item {position} ({name}): a token is at least {least} "
            "characters without spaces (use a long random string)"
        )
    if owners.get(token, name) != name:
        raise ValueError(f"item {position} ({name}): that token is another {who}'s")
    owners[token] = name


def parse_templates(raw: str) -> dict[str, tuple[str, str]]:
    """``en=document_ready:en,es=document_ready:es`` → {locale: (name, language)}: each
    locale's first template."""
    return {locale: choices[0] for locale, choices in parse_template_choices(raw).items()}


def parse_template_choices(raw: str) -> dict[str, list[tuple[str, str]]]:
    """``en=document_ready:en|document_waiting:en,es=document_ready:es`` →
    {locale: [(name, language), …]}, in order of preference."""
    templates: dict[str, list[tuple[str, str]]] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        locale, _, specs = item.partition("=")
        choices: list[tuple[str, str]] = []
        for spec in specs.split("|"):
            name, _, language = spec.partition(":")
            if not (locale.strip() and name.strip() and language.strip()):
                raise ValueError(
                    f"item {item!r} is not locale=name:language (fallbacks: |name:language)"
                )
            choice = (name.strip(), language.strip())
            if choice in choices:
                raise ValueError(f"item {item!r} lists {name.strip()}:{language.strip()} twice")
            choices.append(choice)
        templates[locale.strip()] = choices
    if "en" not in templates:
        raise ValueError("needs an 'en' template (the fallback for other locales)")
    return templates


def parse_template_ttls(raw: str) -> dict[str, float]:
    """``document_ready=43200,brief_ready:es=3600`` → {"document_ready": 43200.0,
    "brief_ready:es": 3600.0}: a template's time to live by name, or by name:language."""
    ttls: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        key, _, seconds = item.partition("=")
        name, _, language = key.strip().partition(":")
        if not name or (":" in key and not language) or not seconds.strip().isdigit():
            raise ValueError(
                f"item {item!r} is not name=seconds or name:language=seconds (whole seconds)"
            )
        ttl = int(seconds)
        if not 1 <= ttl <= PLATFORM_TTL_SECONDS:
            raise ValueError(f"item {item!r}: a time to live is 1 s to 30 days")
        ttls[key.strip()] = float(ttl)
    return ttls


# What a document template's body may name: the person's name, what the document
# is, its day (delivery/as_file.py fills them in).
DOCUMENT_PARAMETERS = ("name", "kind", "date")


def parse_document_parameters(raw: str) -> dict[str, tuple[str, ...]]:
    """``brief_attached=name|date`` → {"brief_attached": ("name", "date")}."""
    parameters: dict[str, tuple[str, ...]] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, names = item.partition("=")
        chosen = tuple(n.strip() for n in names.split("|") if n.strip())
        if not sep or not name.strip() or not chosen:
            raise ValueError(f"item {item!r} is not template=param|param")
        unknown = sorted(set(chosen) - set(DOCUMENT_PARAMETERS))
        if unknown:
            raise ValueError(
                f"item {item!r} names {', '.join(map(repr, unknown))}; a document template's "
                f"parameters are {', '.join(DOCUMENT_PARAMETERS)}"
            )
        parameters[name.strip()] = chosen
    return parameters


def parse_file_kinds(raw: str) -> frozenset[str]:
    """``plan,daily_brief`` → those kinds; ``none`` (or empty) → no kind."""
    return frozenset() if raw.strip().lower() == "none" else parse_review_kinds(raw)


def knock_choices(locale: str, choices: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The locale's knock templates in order of preference (English's when it has none)."""
    return choices.get(locale) or choices["en"]


def knock_template_list(raw: str) -> list[tuple[str, str]]:
    """Every distinct (name, language) of ``DELIVERY_KNOCK_TEMPLATES``, in order."""
    seen: list[tuple[str, str]] = []
    for choices in parse_template_choices(raw).values():
        seen.extend(choice for choice in choices if choice not in seen)
    return seen


def parse_trusted_proxies(raw: str) -> list[str]:
    """``10.0.0.5, 10.1.0.0/16`` → each address or network, checked. Not ``*`` nor a
    network of every address: trusting any peer lets any client say which address it is
    counted as (the review page's sign-in limits count addresses)."""
    import ipaddress

    items = [item.strip() for item in raw.split(",") if item.strip()]
    for item in items:
        try:
            network = ipaddress.ip_network(item, strict=False)
        except ValueError:
            if item == "*":
                raise ValueError(
                    "* trusts every peer, and lets any client choose the address it is counted "
                    "as: name the load balancer's addresses or network (like 10.0.0.0/8)"
                ) from None
            raise ValueError(
                f"{item!r} is not an IP address or network (like 10.0.0.0/8); comma-separated"
            ) from None
        if network.prefixlen == 0:
            raise ValueError(
                f"{item} is every address, and lets any client choose the address it is "
                "counted as: name the load balancer's addresses or network (like 10.0.0.0/8)"
            )
    return items


def parse_review_kinds(raw: str) -> frozenset[str]:
    """``plan,daily_brief`` → {"plan", "daily_brief"}; empty: no kind is reviewed."""
    kinds = frozenset(filter(None, (part.strip() for part in raw.split(","))))
    unknown = sorted(kinds - set(REVIEWABLE_KINDS))
    if unknown:
        raise ValueError(
            f"unknown kind {', '.join(map(repr, unknown))}; kinds are {', '.join(REVIEWABLE_KINDS)}"
        )
    return kinds


# ── the applications' door: DELIVERY_API_* ──────────────────────────────

APPLICATION_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
API_TOKEN_MIN_LENGTH = 16
WEBHOOK_SECRET_PREFIX = "whsec_"


def _named_items(raw: str, what: str) -> list[tuple[str, str]]:
    """``a=x,b=y`` → [(a, x), (b, y)]; each name an application name. The values are
    secrets: an error names the item's position and its application, never the value."""
    items: list[tuple[str, str]] = []
    for position, item in enumerate(filter(None, (p.strip() for p in raw.split(","))), 1):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"item {position} is not application={what}")
        if not APPLICATION_NAME.match(name):
            raise ValueError(
                f"item {position}: {name!r} is not an application name (lower-case letters, "
                "digits, '.', '_' or '-', at most 63)"
            )
        items.append((name, value))
    return items


def parse_api_tokens(raw: str) -> dict[str, str]:
    """``DELIVERY_API_TOKENS`` (``app=token,…``) → {token: application}; an application
    may have several tokens (one replacing another), a token one application."""
    tokens: dict[str, str] = {}
    for position, (name, token) in enumerate(_named_items(raw, "token"), 1):
        _claim_token(tokens, position, name, token, API_TOKEN_MIN_LENGTH, "application")
    return tokens


def parse_api_webhooks(raw: str) -> dict[str, str]:
    """``DELIVERY_API_WEBHOOKS`` (``app=url,…``) → {application: url}, one each."""
    hooks: dict[str, str] = {}
    for position, (name, url) in enumerate(_named_items(raw, "url"), 1):
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"item {position} ({name}): not an http(s) URL")
        if name in hooks:
            raise ValueError(f"item {position} ({name}): one endpoint per application")
        hooks[name] = url
    return hooks


def parse_webhook_secrets(raw: str) -> dict[str, list[bytes]]:
    """``DELIVERY_API_WEBHOOK_SECRETS`` (``app=whsec_<base64>,…``) → {application: keys}:
    Standard Webhooks secrets, 24 to 64 bytes each; several sign with each."""
    import base64
    import binascii

    secrets: dict[str, list[bytes]] = {}
    for position, (name, text) in enumerate(_named_items(raw, "whsec_<base64>"), 1):
        try:
            key = base64.b64decode(text.removeprefix(WEBHOOK_SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if not text.startswith(WEBHOOK_SECRET_PREFIX) or not 24 <= len(key) <= 64:
            raise ValueError(
                f"item {position} ({name}): not whsec_ followed by the base64 of 24 to 64 "
                "random bytes"
            )
        secrets.setdefault(name, []).append(key)
    return secrets
