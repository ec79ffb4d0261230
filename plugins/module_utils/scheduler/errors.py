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
