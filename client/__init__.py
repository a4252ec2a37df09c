"""Clients of flow-sidecar: the HTTP API client, `flow-config`, and (for producers) the
flow-controlled publisher."""
