"""Sync options: Argo CD's names, no-ops reported, the rest refused with the option named."""

from __future__ import annotations

import pytest

from meshpilot.gitops.sync import SyncOptionError, parse_resource_options, parse_sync_options


def test_app_options() -> None:
    options = parse_sync_options(
        [
            "CreateNamespace=true",
            "PruneLast=true",
            "ApplyOutOfSyncOnly=true",
            "PrunePropagationPolicy=background",
        ]
    )
    assert options.create_namespace and options.prune_last and options.apply_out_of_sync_only
    assert options.prune_propagation_policy == "background" and options.notes == ()


def test_server_side_apply_and_replace_are_reported_no_ops() -> None:
    options = parse_sync_options(["ServerSideApply=true", "Replace=true"])
    assert options.server_side_apply and options.replace
    assert [n.split(":")[0] for n in options.notes] == [
        "ServerSideApply=true has no effect",
        "Replace=true has no effect",
    ]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("Prune=true", "syncPolicy.syncOptions: unknown sync option 'Prune'"),
        ("CreateNamespace", "'CreateNamespace' is not of the form Name=value"),
        ("CreateNamespace=yes", "CreateNamespace=yes: expected true or false"),
        ("Validate=false", "Validate=false is not supported"),
        ("PrunePropagationPolicy=later", "expected one of foreground, background, orphan"),
    ],
)
def test_bad_app_options_are_refused(option: str, message: str) -> None:
    with pytest.raises(SyncOptionError) as info:
        parse_sync_options([option])
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("options", "prune", "delete", "prune_last"),
    [
        ([], True, True, False),
        (["Prune=false"], False, True, False),
        (["Prune=confirm", "Delete=false"], False, False, False),
        (["PruneLast=true"], True, True, True),
    ],
)
def test_resource_options(options: list[str], prune: bool, delete: bool, prune_last: bool) -> None:
    parsed = parse_resource_options(options, "Service/shop/reviews")
    assert (parsed.prune, parsed.delete, parsed.prune_last) == (prune, delete, prune_last)


def test_unknown_resource_option_names_the_object() -> None:
    with pytest.raises(
        SyncOptionError, match="Service/shop/reviews: unknown sync option 'Frobnicate'"
    ):
        parse_resource_options(["Frobnicate=true"], "Service/shop/reviews")
