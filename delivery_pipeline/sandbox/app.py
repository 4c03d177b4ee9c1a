"""The sandbox's HTTP app: the ``/_sandbox`` controls (sandbox/controls.py) before
the Cloud API (sandbox/cloud_api.py), both over one simulated platform
(sandbox/simulated.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware

from delivery_pipeline.sandbox import cloud_api, controls
from delivery_pipeline.sandbox.broken_answers import DropFilter
from delivery_pipeline.sandbox.config import SandboxConfig
from delivery_pipeline.sandbox.guard import ControlGuard
from delivery_pipeline.sandbox.simulated import Sandbox


def create_app(config: SandboxConfig | None = None) -> Starlette:
    """The sandbox as an ASGI app (webhook workers start with the app's lifespan)."""
    sandbox = Sandbox(config or SandboxConfig())
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, DropFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(DropFilter())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sandbox.outbox.start()
        try:
            yield
        finally:
            await sandbox.outbox.stop()

    # The controls first: the Cloud API's GET /{version}/{id} would match them too.
    routes = [*controls.ROUTES, *cloud_api.ROUTES]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(ControlGuard)])
    app.state.sandbox = sandbox
    return app
