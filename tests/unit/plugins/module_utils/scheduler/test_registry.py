"""The registry (name -> class, above the filters and weighers) and the names the request
checks against (request_spec.py, below them) list the same filters and weighers, in the same
order, with the same multiplier options: the two halves of one list, kept apart by the layers."""

from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler import registry, request_spec


def test_the_request_knows_every_registered_filter_in_order():
    assert list(registry.FILTERS) == list(request_spec.FILTER_NAMES)


def test_the_request_knows_every_registered_weigher_and_its_multiplier():
    assert {name: weigher.multiplier_option for name, weigher in registry.WEIGHERS.items()} == (
        request_spec.WEIGHER_MULTIPLIER_OPTIONS)
    assert list(registry.WEIGHERS) == list(request_spec.WEIGHER_MULTIPLIER_OPTIONS)


def test_each_class_is_registered_under_its_own_name():
    for table in (registry.FILTERS, registry.WEIGHERS):
        for name, cls in table.items():
            assert cls.name == name


def test_the_defaults_are_registered():
    assert set(request_spec.DEFAULT_FILTERS) <= set(registry.FILTERS)
    assert request_spec.DEFAULT_WEIGHERS == list(registry.WEIGHERS)
