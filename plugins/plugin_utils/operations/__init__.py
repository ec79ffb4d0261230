"""Berth's operations: each verb in one place, given its ports (ledger, hypervisor sessions, hooks)."""
