"""The procrastinate side of bench/vs_procrastinate.py, run as its own process.

One task per document: read the body and the number, cut it with the same
chunker, send the chunks one after another with httpx to the sandbox, mark the
document delivered. The same process-wide pacer as our engine (so both respect
the limit the same way), and a throttled chunk (130429/131056) is waited out and
retried in place. No claim, no fence, no chunk ledger: that is the point.

    python bench/_procrastinate_worker.py schema|defer PHONE_PREFIX|work|recover

Environment: BENCH_PG_URL, BENCH_SANDBOX_URL, BENCH_RATE, BENCH_CONCURRENCY, and
BENCH_HTTP: ``httpx`` (default: what a worker written with this project's other
HTTP calls would use) or ``aiohttp`` (the HTTP client our engine sends with).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import procrastinate  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402
from psycopg_pool import AsyncConnectionPool  # noqa: E402

from delivery_pipeline.delivery.chunking import delivery_messages  # noqa: E402
from delivery_pipeline.delivery.pacer import RateLimiter  # noqa: E402
from delivery_pipeline.settings import DEV_ACCESS_TOKEN, DEV_PHONE_NUMBER_ID  # noqa: E402

URL = os.environ.get("BENCH_PG_URL", "")
SANDBOX = os.environ.get("BENCH_SANDBOX_URL", "")
RATE = float(os.environ.get("BENCH_RATE", "80"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "32"))
HTTP = os.environ.get("BENCH_HTTP", "httpx")

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=URL))
_state: dict[str, object] = {}


class _Answer:
    def __init__(self, status_code: int, body: bytes) -> None:
        self.status_code, self.text = status_code, body.decode()

    def json(self) -> dict:
        import json

        return json.loads(self.text)


class _Aiohttp:
    """The same POSTs through aiohttp, answering like httpx (status, json)."""

    def __init__(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {DEV_ACCESS_TOKEN}"},
            connector=aiohttp.TCPConnector(limit=CONCURRENCY, keepalive_timeout=2.0),
        )

    async def post(self, url: str, json: dict) -> _Answer:
        async with self._session.post(url, json=json) as response:
            return _Answer(response.status, await response.read())

    async def aclose(self) -> None:
        await self._session.close()


def _resources() -> tuple[httpx.AsyncClient, RateLimiter, AsyncConnectionPool]:
    if not _state:
        _state["http"] = (
            _Aiohttp()
            if HTTP == "aiohttp"
            else httpx.AsyncClient(
                headers={"Authorization": f"Bearer {DEV_ACCESS_TOKEN}"},
                timeout=10.0,
                limits=httpx.Limits(
                    max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY
                ),
            )
        )
        _state["limiter"] = RateLimiter(RATE)
        _state["pool"] = AsyncConnectionPool(
            URL,
            min_size=1,
            max_size=4,
            open=False,
            kwargs={"autocommit": True, "row_factory": dict_row},
        )
    return _state["http"], _state["limiter"], _state["pool"]  # type: ignore[return-value]


@app.task(name="send_document", retry=procrastinate.RetryStrategy(max_attempts=5, wait=1))
async def send_document(document_id: int) -> None:
    http, limiter, pool = _resources()
    if pool.closed:
        await pool.open()
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT d.body, p.phone FROM documents d JOIN people p ON p.id = d.person_id "
                "WHERE d.id = %s",
                (document_id,),
            )
        ).fetchone()
    url = f"{SANDBOX}/v25.0/{DEV_PHONE_NUMBER_ID}/messages"
    for text in delivery_messages(row["body"], 4096):
        while True:
            await limiter.acquire()
            response = await http.post(
                url,
                json={
                    "messaging_product": "whatsapp",
                    "recipient_type": "individual",
                    "to": row["phone"],
                    "type": "text",
                    "text": {"preview_url": False, "body": text},
                },
            )
            if response.status_code == 200:
                break
            code = (response.json().get("error") or {}).get("code")
            if code in (130429, 131056):
                await limiter.back_off(1.0)
                await asyncio.sleep(1.0)
                continue
            raise RuntimeError(f"send failed: {response.status_code} {response.text[:200]}")
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE documents SET delivered_at = now() WHERE id = %s", (document_id,)
        )


async def main(command: str, arg: str | None) -> None:
    async with app.open_async():
        if command == "schema":
            await app.schema_manager.apply_schema_async()
        elif command == "defer":
            import psycopg

            async with await psycopg.AsyncConnection.connect(URL) as conn:
                ids = [
                    r[0]
                    for r in await (
                        await conn.execute(
                            "SELECT d.id FROM documents d JOIN people p ON p.id = d.person_id "
                            "WHERE p.phone LIKE %s ORDER BY d.id",
                            (arg + "%",),
                        )
                    ).fetchall()
                ]
            await send_document.batch_defer_async(*({"document_id": i} for i in ids))
            print(len(ids))
        elif command == "work":
            await app.run_worker_async(
                concurrency=CONCURRENCY, wait=False, install_signal_handlers=False
            )
            if _state:
                await _state["http"].aclose()  # type: ignore[attr-defined]
                await _state["pool"].close()  # type: ignore[attr-defined]
        elif command == "recover":
            # The documented recovery: jobs left in 'doing' by a dead worker are retried.
            stalled = list(await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=0))
            for job in stalled:
                await app.job_manager.retry_job(job)
            print(len(stalled))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
