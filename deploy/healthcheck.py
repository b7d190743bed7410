#!/usr/bin/env python3
"""Container health checks of the kafkacoord images (installed as ``kafkacoord-healthcheck``).

    kafkacoord-healthcheck http [--port N] [--path /health]   a daemon, or the Spark UI
    kafkacoord-healthcheck node ID                            a node agent is live
    kafkacoord-healthcheck group GROUP                        a consumer group has members

Exit status 0 means healthy, 1 unhealthy (with the reason on stderr), 2 bad usage.
``node`` and ``group`` read the daemon settings (``KAFKACOORD_BOOTSTRAP``,
``KAFKACOORD_TOPIC_PREFIX``, ``KAFKACOORD_OFFSETS_PARTITIONS``, ...).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request

DEFAULT_METRICS_PORT = 9464
LIVE_GROUP_STATES = ("Stable", "CompletingRebalance", "PreparingRebalance")


def check_http(port: int, path: str, timeout_s: float) -> str | None:
    """None when ``GET http://127.0.0.1:port/path`` answers 200, else why not."""
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status: int = response.status
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{url} did not answer: {exc}"
    return None if status == 200 else f"{url} answered {status}"


def check_node(node_id: int, timeout_s: float) -> str | None:
    """None when the node is registered, unfenced and not shutting down."""
    from kafkacoord.client.admin import read_metadata
    from kafkacoord.coordinator.controller.image import is_live_node
    from kafkacoord.server.settings import load_settings

    settings = load_settings()
    if not settings.bootstrap:
        return "KAFKACOORD_BOOTSTRAP is not set"
    image = read_metadata(settings.bootstrap, settings.topics.metadata, timeout_s=timeout_s)
    node = image.node(node_id)
    if node is None:
        return f"node {node_id} is not registered"
    if not is_live_node(node):
        return f"node {node_id} is fenced or shutting down"
    return None


def check_group(group: str, timeout_s: float) -> str | None:
    """None when the group is alive and has at least one member."""
    from kafkacoord.client import GroupAdmin
    from kafkacoord.server.settings import load_settings

    settings = load_settings()
    if not settings.bootstrap:
        return "KAFKACOORD_BOOTSTRAP is not set"
    with GroupAdmin(
        settings.bootstrap,
        topic_prefix=settings.topic_prefix,
        offsets_partitions=settings.offsets_partitions,
        tls=settings.client_tls(),
        timeout_s=timeout_s,
    ) as admin:
        [described] = admin.describe_groups([group])
    if described.state not in LIVE_GROUP_STATES or not described.members:
        return f"group {group} is {described.state} with {len(described.members)} members"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafkacoord-healthcheck",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--timeout", type=float, default=4.0, help="seconds (default 4)")
    checks = parser.add_subparsers(dest="check", required=True)
    http = checks.add_parser("http", parents=[common], help="an HTTP endpoint answers 200")
    http.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("KAFKACOORD_METRICS_PORT", DEFAULT_METRICS_PORT)),
        help="default: $KAFKACOORD_METRICS_PORT, else 9464",
    )
    http.add_argument("--path", default="/health")
    node = checks.add_parser(
        "node", parents=[common], help="a node agent is registered and unfenced"
    )
    node.add_argument("node_id", type=int)
    group = checks.add_parser("group", parents=[common], help="a consumer group has members")
    group.add_argument("group")
    args = parser.parse_args(argv)

    problem: str | None
    try:
        if args.check == "http":
            problem = check_http(args.port, args.path, args.timeout)
        elif args.check == "node":
            problem = check_node(args.node_id, args.timeout)
        else:
            problem = check_group(args.group, args.timeout)
    except Exception as exc:  # any failure to look is an unhealthy answer, never a crash
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
