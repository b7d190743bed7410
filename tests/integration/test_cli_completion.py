"""Shell completion of ``--topic`` and ``--group`` against a daemon on the real broker, as
bash runs it: names come back filtered by what is typed, from the cluster the typed
options name, and nothing at all (promptly, without a word on stderr) when no daemon
answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.storage.topics import InternalTopics
from tests.completion import complete, install_entry_point

from .cluster import Replicas, fast_daemon_env, start_daemon, wait_until

pytestmark = pytest.mark.integration

DAEMON = 7
NODE = 1
SHARDS = 2
TOPICS = ("orders", "orders-audit", "payments")
GROUPS = ("orders-app", "orders-etl", "billing")
PROMPT_S = 10  # generous: the lookup gives up after 1.5 s, plus two Python starts


# Completion is the CLI's own; the broker kind changes nothing it does.
@pytest.mark.parametrize("bootstrap", ["tansu"], indirect=True)
def test_topic_and_group_names_complete_from_the_running_daemon(
    bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    env = {**fast_daemon_env(bootstrap, prefix, SHARDS),
           "KAFKACOORD_DATA_DIR": str(tmp_path / "no-local-daemon")}  # fmt: skip
    bin_dir = install_entry_point(tmp_path / "bin")

    # The broker answers but no daemon does yet: group ids need one.
    before = complete("kafkacoord groups describe --group ", bin_dir, env)
    assert (before.offered, before.stderr) == ([], "")
    assert before.elapsed_s < PROMPT_S

    daemon = start_daemon(env, tmp_path, DAEMON)
    agent = NodeAgent(bootstrap, node_id=NODE, handler=Replicas(), topic_prefix=prefix,
                      heartbeat_interval_ms=500)  # fmt: skip
    try:
        daemon.wait_for("daemon ready", timeout_s=120)
        agent.start(timeout_s=120)
        topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
        wait_until(lambda: NODE in read_metadata(bootstrap, topics.metadata).live_nodes(),
                   timeout_s=120, what="the node live")  # fmt: skip
        with ControllerAdmin(bootstrap, topics) as admin:
            for name in TOPICS:
                admin.create_topic(name, 1, 1)
        with GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS) as groups:
            for group in GROUPS:
                assert groups.reset_offsets(group, {("orders", 0): 0}) == {
                    ("orders", 0): ErrorCode.NONE}  # fmt: skip

        assert complete("kafkacoord topics describe --topic ord", bin_dir, env).offered == [
            "orders", "orders-audit"]  # fmt: skip
        # Every topic ``topics list`` shows, the group shards' own among them.
        assert complete("kafkacoord topics delete -t ", bin_dir, env).offered == sorted(
            [*TOPICS, topics.offsets])  # fmt: skip
        assert complete("kafkacoord groups describe --group orders-", bin_dir, env).offered == [
            "orders-app", "orders-etl"]  # fmt: skip
        assert complete("kafkacoord groups delete -g b", bin_dir, env).offered == ["billing"]
        assert complete("kafkacoord topics describe --topic zzz", bin_dir, env).offered == []

        # With no bootstrap in the environment, the options typed so far name the cluster.
        bare: dict[str, str | None] = {**env, "KAFKACOORD_BOOTSTRAP": None}
        assert complete("kafkacoord topics describe --topic pay", bin_dir, bare).offered == []
        typed = complete(f"kafkacoord groups describe --bootstrap-server {bootstrap} --group o",
                         bin_dir, bare)  # fmt: skip
        assert typed.offered == ["orders-app", "orders-etl"]
        config = tmp_path / "cluster.toml"
        config.write_text(f'bootstrap = "{bootstrap}"\n')
        from_file = complete(f"kafkacoord topics describe -c {config} --topic pay", bin_dir, bare)
        assert from_file.offered == ["payments"]
    finally:
        agent.close()
        daemon.stop()

    # The daemon is gone: group ids come back empty, promptly and without a word.
    after = complete("kafkacoord groups describe --group orders", bin_dir, env)
    assert (after.offered, after.stderr) == ([], "")
    assert after.elapsed_s < PROMPT_S
