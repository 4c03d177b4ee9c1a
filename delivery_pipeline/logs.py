"""The one logging set-up of every process we start: the webhook service, the CLI and
the sandbox call ``configure``; Dagster's code location (webserver, daemon, every run)
calls ``quiet_http_clients`` and ``ready_for_capture`` when it loads.

HTTP client libraries log the URL of every request (httpx at INFO, httpcore,
urllib3 and aiohttp at DEBUG, hpack the headers), and our URLs are secrets: a
Slack incoming webhook's path is its credential, a URL may carry a password.
So those loggers are held at WARNING whatever level a process runs at, and
whatever a deployment forwards into Dagster's event log (``python_logs``).

``DELIVERY_LOG_FORMAT=json`` makes every such process write one JSON object a
line (``JsonFormatter``: time, level, logger, message, process, traceback) for a
log shipper; in Dagster's processes our loggers get a handler of their own that
writes so (Dagster's own lines keep Dagster's format; its event log is
structured already).

Then every line our handler writes passes ``Redact``: any secret value in
force (``Settings.secret_texts``: tokens, webhook URLs, the database URL and
its password) is replaced by the name of its variable, in the message and in
a traceback, so a secret that reaches a log line by a path nobody foresaw is
still not written.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Mapping

from pydantic import ValidationError

from delivery_pipeline.settings import LogSettings, Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
HTTP_CLIENT_LOGGERS = ("httpx", "httpcore", "urllib3", "aiohttp", "hpack")
# Our loggers' parent: the one a deployment hands to Dagster's log capture.
CAPTURED_LOGGER = "delivery_pipeline"
# Shorter texts are not treated as secrets: replacing them would garble every line.
MIN_SECRET_LENGTH = 6


def quiet_http_clients() -> None:
    """Hold the HTTP client libraries' loggers at WARNING: none logs a URL there."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class Redact(logging.Filter):
    """Replaces each secret text in a record by ``<VARIABLE>``."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        super().__init__()
        # longest first: a URL goes whole before its password alone
        self._secrets = sorted(
            (
                (text, f"<{variable}>")
                for text, variable in secrets.items()
                if len(text) >= MIN_SECRET_LENGTH
            ),
            key=lambda pair: -len(pair[0]),
        )

    def scrub(self, text: str) -> str:
        for secret, name in self._secrets:
            if secret in text:
                text = text.replace(secret, name)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        message = record.getMessage()
        scrubbed = self.scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: what a log shipper parses without a pattern. The
    message and traceback are the record's after ``Redact`` (a filter of the handler,
    run before its formatter)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def log_format(settings: Settings | None = None) -> str:
    """``DELIVERY_LOG_FORMAT``: from ``settings``, else this process's environment (a
    process that logs before it reads its settings); a bad value: text, until the
    settings, read next, stop the process naming it."""
    if settings is not None:
        return settings.logs.format
    try:
        return LogSettings.from_environ(os.environ).format
    except ValidationError:
        return "text"


def formatter(settings: Settings | None = None) -> logging.Formatter:
    return JsonFormatter() if log_format(settings) == "json" else logging.Formatter(FORMAT)


def announce(text: str, settings: Settings | None = None, *, name: str = CAPTURED_LOGGER) -> None:
    """A start-up line on stderr whatever the level (where a process says where it
    listens): plain, or one JSON object under ``DELIVERY_LOG_FORMAT=json``, so a log
    shipper reads every line of the process the same way."""
    if log_format(settings) == "json":
        record = logging.LogRecord(name, logging.INFO, __file__, 0, text, None, None)
        text = JsonFormatter().format(record)
    print(text, file=sys.stderr, flush=True)


def configure(level: int | str, settings: Settings | None = None) -> None:
    """Log to stderr at ``level`` in ``DELIVERY_LOG_FORMAT``, HTTP clients at WARNING,
    ``settings``' secrets redacted."""
    level = level.upper() if isinstance(level, str) else level
    logging.basicConfig(level=level, format=FORMAT)
    root = logging.getLogger()
    root.setLevel(level)  # also when a caller configured it before
    if log_format(settings) == "json":
        for handler in root.handlers:
            handler.setFormatter(JsonFormatter())
    quiet_http_clients()
    # The PDF renderer's font subsetting logs some forty INFO lines for each file.
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    if settings is not None:
        redact(settings)


def redact(settings: Settings) -> None:
    """From now on the root handlers write none of ``settings``' secrets (a process that
    reads its settings after it began to log calls this then)."""
    scrubber = Redact(settings.secret_texts())
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, Redact)]:
            handler.removeFilter(old)
        handler.addFilter(scrubber)


class Scrubbing(logging.Handler):
    """Writes nothing: its ``Redact`` filter scrubs each record in place for the handlers
    after it on the same logger. (Not a ``NullHandler``, whose ``handle`` skips the
    filters.)"""

    def emit(self, record: logging.LogRecord) -> None:
        pass


def ready_for_capture(settings: Settings) -> None:
    """Our loggers as Dagster captures them (``python_logs: managed_python_loggers:
    [delivery_pipeline]`` in dagster.yaml): at INFO, their level for operators,
    whatever the process's root level; and each record scrubbed of every secret
    before any other handler on the ``delivery_pipeline`` logger sees it, since
    Dagster hangs its handler there and the record reaches it before it propagates
    to the root's redacting handlers."""
    package = logging.getLogger(CAPTURED_LOGGER)
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
    scrubbing = Scrubbing()
    scrubbing.addFilter(Redact(settings.secret_texts()))
    others = [h for h in package.handlers if not isinstance(h, Scrubbing | JsonLines)]
    package.handlers = [scrubbing, *others]  # first: Dagster's handler comes later
    if settings.logs.format == "json":
        # Our lines on stderr as JSON (a run's stderr is its compute log), scrubbed by
        # the handler before it; not also through the root's handlers, which Dagster
        # leaves in its own format.
        package.handlers.insert(1, JsonLines())
        package.propagate = False


class JsonLines(logging.StreamHandler):  # type: ignore[type-arg]
    """A stderr handler writing ``JsonFormatter`` lines (Dagster's processes, ``json``)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(JsonFormatter())
