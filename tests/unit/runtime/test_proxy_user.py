"""Each pod's proxy user: a UID of its own, from the pod's address, in the proxies' group."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from meshpilot.runtime.pod import PROXY_GID, PodError, RunAs, pod_proxy_user


def test_uid_is_the_address_as_a_number() -> None:
    assert pod_proxy_user(IPv4Address("10.244.0.8")) == RunAs(183762952, PROXY_GID)
    assert pod_proxy_user(IPv4Address("172.31.255.254")).uid == 2887778302


def test_neighbours_never_share_a_uid() -> None:
    subnet = [IPv4Address("10.244.0.0") + n for n in range(2, 300)]
    assert len({pod_proxy_user(address).uid for address in subnet}) == len(subnet)


def test_an_address_below_the_account_range_is_refused() -> None:
    with pytest.raises(PodError, match=r"0\.0\.255\.254 gives no proxy UID of its own"):
        pod_proxy_user(IPv4Address("0.0.255.254"))
