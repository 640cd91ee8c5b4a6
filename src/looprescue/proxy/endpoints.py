"""The proxy's own endpoints, answered by the proxy and never relayed upstream:

* ``GET /metrics``: the Prometheus text exposition of the rescue's counters (``metrics.py``);
* ``GET /healthz``: 200 while the process serves requests (it does not call the upstream).
"""

from __future__ import annotations

import os
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from ..metrics import exposition


def own_routes(registry: Any = None) -> list[Route]:
    """The routes, for the metrics in ``registry`` (None: the process's default registry)."""

    async def metrics(request: Request) -> Response:
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if registry is None and shared:
            # several workers (``--workers``): the sum of every worker's counts
            from prometheus_client import CollectorRegistry, multiprocess

            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged, path=shared)
            body, content_type = exposition(merged)
        else:
            body, content_type = exposition(registry)
        return Response(body, headers={"content-type": content_type})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    return [
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
