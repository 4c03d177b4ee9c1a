"""delivery_pipeline: make sure generated documents actually reach people on WhatsApp."""

__version__ = "0.1.0"
