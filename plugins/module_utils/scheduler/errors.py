from __future__ import annotations


class SchedulerInputError(ValueError):
    """Bad input to the placement engine, raised before anything is decided.

    `field` names the offending input the way a user wrote it ("flavor.vcpus",
    "hosts[hv1].free_ram_mb", "enabled_filters") so that the one place per entry point
    that reports errors can point at it without parsing the message.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class ComputeHostMetricNotFound(SchedulerInputError):
    """MetricsWeigher with metrics_required met a candidate without a weighed metric (Nova's
    exception of the same name): the request fails rather than weigh the host at a guess."""

    def __init__(self, host: str, nodename: str, metric: str) -> None:
        super().__init__(
            f"hosts[{host}].metrics",
            f"host {host} (node {nodename}) has no metric {metric!r}, which "
            f"metrics_weight_setting weighs and metrics_required requires: enable MetricsFilter "
            f"to pass over hosts without it, or set metrics_required to false to weigh them at "
            f"metrics_weight_of_unavailable")
        self.host = host
        self.nodename = nodename
        self.metric = metric
