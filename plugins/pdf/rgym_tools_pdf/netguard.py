"""Which URLs ``read_pdf`` may fetch on an agent's behalf.

The tool runs on the host, so it is the episode's only way out to the network;
it must not become a way into the host's own network.  Only http(s) URLs are
fetched, hosts that resolve to loopback, private, link-local or reserved
addresses are refused unless allowed, and URLs the task's leakage policy
blocks are refused.  Every redirect hop is checked again.
"""

from __future__ import annotations

import ipaddress
import socket

import httpx

from rgym_core import LeakagePolicy


class BlockedURL(Exception):
    """The URL may not be fetched; the message says why, for the agent."""


def _private_address(host: str, port: int) -> str | None:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # let the request fail with a connection error
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if (addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_reserved
                or addr.is_multicast or addr.is_unspecified):
            return str(addr)
    return None


class URLGuard:
    """Checks each request URL; raise :class:`BlockedURL` to stop it."""

    def __init__(self, policy: LeakagePolicy | None = None, *,
                 allow_private_hosts: bool = False) -> None:
        self.policy = policy or LeakagePolicy()
        self.allow_private_hosts = allow_private_hosts

    def check(self, url: str | httpx.URL) -> None:
        parsed = httpx.URL(str(url))
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise BlockedURL(f"only http:// and https:// URLs can be read, got {str(url)!r}")
        if self.policy.url_blocked(str(parsed)):
            raise BlockedURL(f"{parsed} is blocked by the task's leakage policy")
        if not self.allow_private_hosts:
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            private = _private_address(parsed.host, port)
            if private is not None:
                raise BlockedURL(f"{parsed.host} resolves to a private or loopback address "
                                 f"({private}); only public URLs can be read")

    def on_request(self, request: httpx.Request) -> None:
        """An httpx ``request`` event hook (runs for every redirect hop)."""
        self.check(request.url)
