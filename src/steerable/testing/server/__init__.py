"""A local OpenAI-compatible chat server for tests and benchmarks (a test tool, not a model).

    with TestServer(latency_s=0.05, capacity=8, faults=FaultPlan(rate=0.2)) as server:
        ...  # point an OpenAI client at server.url

or from a shell: `python -m steerable.vlm.testserver --port 8000 --latency 0.05 --capacity 8`.
"""

from steerable.vlm.testserver.app import Responder, ServerStats, TestServer
from steerable.vlm.testserver.faults import FAULT_KINDS, FaultPlan
from steerable.vlm.testserver.instances import minimal_instance

__all__ = ["FAULT_KINDS", "FaultPlan", "Responder", "ServerStats", "TestServer", "minimal_instance"]
