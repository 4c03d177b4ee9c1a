"""``Settings.logs`` (``DELIVERY_LOG_*``): how log lines are written."""

from typing import ClassVar, Literal

from pydantic import Field

from delivery_pipeline.settings.section import Section


class LogSettings(Section):
    """How every process of the project writes its log lines (``delivery_pipeline/logs.py``)."""

    env_prefix: ClassVar[str] = "DELIVERY_LOG_"

    format: Literal["text", "json"] = Field(
        "text",
        description=(
            "text: one readable line per record; json: one JSON object per line (time, level, "
            "logger, message, process, traceback), for a log shipper; secrets redacted either way"
        ),
    )
