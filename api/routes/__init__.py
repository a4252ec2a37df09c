"""One router per resource; `api.app` wires them."""
