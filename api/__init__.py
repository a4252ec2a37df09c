"""flow-sidecar's HTTP API (FastAPI): flow answers, per-queue settings, health."""
