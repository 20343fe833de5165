"""What the API tells its operators, at ``GET /metrics`` (Prometheus's text
format; no caller needed, as the worker's /metrics): its requests by route
and status, the streams open and the runs followed, and how long a step
recorded in a run's history takes to reach the clients that follow it."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Labels: method (one of METHODS, or "other"), route (the route's template,
# "/v1/runs/{run}", or "unmatched"), status (the HTTP status answered, one
# of 100 to 599, or "other"). Each label takes a bounded set of values,
# whatever a caller sends: a label is a series for good.
REQUESTS = "agent_api_requests"
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)
# Event streams open now, and runs whose history is being read now (one
# follower per run, which reads it once for every stream of it: events.py).
OPEN_STREAMS = "agent_api_open_streams"
FOLLOWED_RUNS = "agent_api_followed_runs"
# From an event's time in history to the API's reading it, for events
# recorded while the run was followed (seconds).
EVENT_DELAY = "agent_api_event_delay_seconds"


def method_label(method: str) -> str:
    """A request's method as the metrics label it: by name when it is one
    of HTTP's, else "other" (a caller may send any token as a method)."""
    return method if method in METHODS else "other"


def status_label(status: int) -> str:
    return str(status) if 100 <= status <= 599 else "other"


class ApiMetrics:
    """The API's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            REQUESTS,
            "Requests answered, by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.open_streams = Gauge(OPEN_STREAMS, "Event streams open", registry=self.registry)
        self.followed_runs = Gauge(
            FOLLOWED_RUNS, "Runs being read (one reader each)", registry=self.registry
        )
        self.event_delay = Histogram(
            EVENT_DELAY,
            "From a step's time in history to the API reading it",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=self.registry,
        )
