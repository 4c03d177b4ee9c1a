"""Secret text and URLs that may carry a password: reading a secret, hiding a URL's
password, finding the passwords a value carries, telling clear text from the loopback.
"""

from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pydantic import (
    SecretStr,
)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def carries_credentials(value: Any) -> bool:
    """Is ``value`` a URL with a password in its userinfo (``https://user:key@host/``)?"""
    if not isinstance(value, str) or "://" not in value:
        return False
    try:
        return urlsplit(value).password is not None
    except ValueError:
        return False


def without_password(url: str) -> str:
    """``url`` as it may be shown: without the password of its userinfo or a ``password``
    query parameter (the rest as it was)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unreadable URL)"
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        kept = [(key, value) for key, value in query if key != "password"]
        parts = parts._replace(query=urlencode(kept, safe="/"))
    return urlunsplit(parts)


def passwords_in(text: str) -> set[str]:
    """The password in a URL (as written and decoded) or a libpq connection string."""
    if "://" in text:
        try:
            parts = urlsplit(text)
        except ValueError:
            return set()
        found = {parts.password, *(v for k, v in parse_qsl(parts.query) if k == "password")}
        return {form for p in found if p for form in (p, unquote(p))}
    import psycopg  # a connection string: only the database URL is one

    try:
        value = psycopg.conninfo.conninfo_to_dict(text).get("password")
    except psycopg.ProgrammingError:
        return set()
    return {str(value)} if value else set()


def plain_http_elsewhere(url: str) -> bool:
    """``url`` is ``http://`` to another machine: what is sent there (a token) travels in
    clear text."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme == "http" and host not in LOOPBACK_HOSTS
