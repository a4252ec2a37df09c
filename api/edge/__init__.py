"""The producer edge: `GET /flow` (one parser for the fast path and the route), its parked
long polls, SSE streams' direct writes, and the only code that names uvicorn's or
asyncio's internals (`connection_limits`, `direct_writes`, `paired_writes`); everything
else speaks ASGI. See docs/operations.md, "--direct-writes"."""
