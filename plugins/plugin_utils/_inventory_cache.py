"""What Berth's inventory plugins share: their one I/O step through Ansible's inventory cache.
Private to the collection."""

from __future__ import annotations

from typing import Any, Callable


def fetch_cached(plugin: Any, path: str, cache: bool, key: Any, fetch: Callable[[], Any]) -> Any:
    """``fetch()``'s result, from the inventory cache of ``plugin`` (Cacheable) when its option
    ``cache`` is on, ``cache`` is true (not --flush-cache) and the entry was made for the same
    ``key`` (what the result depends on: never a credential); else fetched and cached.

    ``key`` is compared after a JSON round trip: lists, not tuples.
    """
    cache_key = plugin.get_cache_key(path)
    if plugin.get_option("cache") and cache:
        try:
            cached = plugin._cache[cache_key]
            if cached.get("key") == key:
                return cached["value"]
        except KeyError:
            pass
    value = fetch()
    if plugin.get_option("cache"):
        plugin._cache[cache_key] = {"key": key, "value": value}
    return value
