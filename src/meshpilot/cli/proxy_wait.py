"""`meshpilot proxy wait`: pilot-agent wait, the hold's postStart hook."""

from __future__ import annotations

import click

from meshpilot.agent.wait import DEFAULT_READY_URL, WaitOptions, wait_ready

__all__ = ["wait"]


@click.command()
@click.option(
    "--timeoutSeconds",
    "timeout_seconds",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Give up after this many seconds.",
)
@click.option(
    "--periodMillis",
    "period_millis",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Time between two checks.",
)
@click.option(
    "--requestTimeoutMillis",
    "request_timeout_millis",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Timeout of one check.",
)
@click.option("--url", default=DEFAULT_READY_URL, show_default=True, help="The readiness URL.")
def wait(timeout_seconds: int, period_millis: int, request_timeout_millis: int, url: str) -> None:
    """Wait until the proxy is ready (its readiness URL answers 200); exit 1 on timeout."""
    click.echo(f"Waiting for Envoy proxy to be ready (timeout: {timeout_seconds} seconds)...")
    options = WaitOptions(url, timeout_seconds, period_millis / 1000, request_timeout_millis / 1000)
    result = wait_ready(options)
    if not result.ready:
        raise click.ClickException(
            f"timeout waiting for Envoy proxy to become ready. Last error: {result.last_error}"
        )
    click.echo("Envoy is ready!")
