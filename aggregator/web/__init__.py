"""The web layer: blueprints that parse a request, call one service and shape the response, and the
HTTP around them (errors, security headers, limits, the OpenAPI description, assets, pages)."""
