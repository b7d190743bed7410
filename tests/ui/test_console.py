"""The web console in a real browser, over a daemon on the embedded broker.

The scene: two registered nodes besides the daemon, a placed topic with a
reassignment that cannot finish (its target never reports in sync), a Kafka topic
with a consumer group that commits and then stops, and a group whose id is markup.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacoord.client import ClassicProtocolMember
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.client.group_admin import GroupAdmin
from kafkacoord.client.instants import format_instant
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import controller_api as api
from kafkacoord.spark.lag_history import LAG_SAMPLES, LagRecorder
from kafkacoord.spark.tables import schemas
from kafkacoord.spark.warehouse import Warehouse
from kafkacoord.storage.topics import InternalTopics
from tests.integration.cluster import DaemonProcess, wait_until
from tests.ui.conftest import PASSWORDS, REBOUND

pytestmark = pytest.mark.ui

XSS = "<script>alert(1)</script>"
GROUP = "events-readers"
EVENTS = "events"
PARTITIONS = 3


@dataclass
class Scene:
    url: str
    bootstrap: str
    warehouse: Path
    admin: ControllerAdmin
    groups: GroupAdmin
    producer: Producer

    def produce(self, per_partition: int) -> None:
        for partition in range(PARTITIONS):
            for i in range(per_partition):
                self.producer.produce(EVENTS, b"v", f"k{i}".encode(), partition=partition)
        self.producer.flush(30)


def _heartbeats(admin: ControllerAdmin, epochs: dict[int, int], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for node, epoch in epochs.items():
            # A failed beat is retried a second later; the session is long.
            with contextlib.suppress(Exception):
                admin.call(api.NodeHeartbeat(node_id=node, node_epoch=epoch),
                           api.NodeHeartbeatResponse)  # fmt: skip


@pytest.fixture(scope="module")
def scene(console_daemon: DaemonProcess) -> Iterator[Scene]:
    ready = console_daemon.wait_for("daemon ready")
    url = console_daemon.wait_for("console ready")["url"].rstrip("/")
    bootstrap = ready["bootstrap"]
    topics = InternalTopics("__kc_")
    admin = ControllerAdmin(bootstrap, topics, timeout_s=30)
    groups = GroupAdmin(bootstrap, offsets_partitions=4, timeout_s=30)
    epochs = {}
    for node in (1, 2):
        body = api.RegisterNode(node_id=node, incarnation=f"ui-{node}", rack=f"r{node}")
        registered = admin.call(body, api.RegisterNodeResponse)
        epochs[node] = registered.node_epoch
        admin.call(api.NodeHeartbeat(node_id=node, node_epoch=registered.node_epoch),
                   api.NodeHeartbeatResponse)  # fmt: skip
    stop = threading.Event()
    beats = threading.Thread(target=_heartbeats, args=(admin, epochs, stop), daemon=True)
    beats.start()
    admin.create_topic("orders", replica_assignment={0: [1], 1: [1], 2: [2]})
    # Node 2 never reports itself in sync: the move stays running until stopped.
    admin.alter_reassignments({("orders", 0): [2]})
    kafka = AdminClient({"bootstrap.servers": bootstrap})
    kafka.create_topics([NewTopic(EVENTS, PARTITIONS, 1)])[EVENTS].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        warehouse = Path(console_daemon.env["KAFKACOORD_CONSOLE_WAREHOUSE"])
        yield Scene(url, bootstrap, warehouse, admin, groups, producer)
    finally:
        stop.set()
        beats.join(5)
        groups.close()
        admin.close()


@contextlib.contextmanager
def _opened(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    dialogs: list[str] = []
    opened.dialogs = dialogs

    def on_dialog(dialog: Any) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.accept()  # confirm() of a write; an alert() would be the XSS firing

    opened.on("dialog", on_dialog)
    try:
        yield opened
    finally:
        context.close()


def _log_in(page: Any, url: str, user: str, password: str) -> None:
    page.goto(url + "/login")
    page.fill("#login-form input[name=user]", user)
    page.fill("#login-form input[name=password]", password)
    page.locator("#login").click()


@pytest.fixture
def anonymous(browser: Any) -> Iterator[Any]:
    """A browser nobody has logged in on: the console on loopback lets it read."""
    with _opened(browser) as opened:
        yield opened


@pytest.fixture
def page(browser: Any, scene: Scene) -> Iterator[Any]:
    """A browser logged in as alice, a console admin."""
    with _opened(browser) as opened:
        _log_in(opened, scene.url, "alice", PASSWORDS["alice"])
        opened.wait_for_selector("#user")
        yield opened


def _shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def _eventually(check: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    # A bound, not a timing goal: on two cores shared with another test worker the
    # scene's consumers can take well over 30 s to commit.
    wait_until(lambda: check() or None, timeout_s=timeout_s, what=what)


def test_overview_nodes_and_topic_pages_show_the_cluster(
    scene: Scene, page: Any, artifacts: Path
) -> None:
    page.goto(scene.url + "/")
    assert page.locator("#controller .big").inner_text() == "node 0"
    assert page.locator("#nodes .big").inner_text() == "3 live"
    assert page.locator("#shards tbody tr").count() == 4
    _shot(page, artifacts, "overview")

    page.goto(scene.url + "/nodes")
    rows = page.locator("#node-table tbody tr")
    assert rows.count() == 3
    assert "r2" in rows.nth(2).inner_text()
    _shot(page, artifacts, "nodes")

    page.goto(scene.url + "/topics")
    assert page.locator("#topic-table").get_by_text("orders").count() == 1
    page.get_by_role("link", name="orders").click()
    page.wait_for_url("**/topics/orders")
    table = page.locator("#partition-table tbody tr")
    assert table.count() == 3
    # Partition 0 is moving from node 1 to node 2: node 2 is being added.
    assert table.nth(0).locator("td").nth(6).inner_text() == "2"
    heat = page.locator("#heat tbody tr")
    assert heat.count() == 3
    assert page.locator("#heat td.leader").count() == 3
    assert page.locator("#heat td.adding").count() == 1
    _shot(page, artifacts, "topic")


def test_stopping_a_reassignment_from_its_page(scene: Scene, page: Any, artifacts: Path) -> None:
    page.goto(scene.url + "/reassignments")
    running = page.locator("#running tbody tr")
    _eventually(lambda: "orders-0" in running.first.inner_text(), "the running reassignment")
    assert page.locator("#running progress").count() == 1
    _shot(page, artifacts, "reassignments")

    # Without the page's CSRF token the write is refused and nothing changes.
    refused = page.request.post(
        scene.url + "/reassignments/cancel", form={"topic": "orders", "partition": "0"}
    )
    assert refused.status == 403
    assert "CSRF" in refused.text()
    assert scene.admin.metadata().partition("orders", 0).reassignment is not None

    page.locator("#running button.stop").click()
    page.wait_for_selector("#notice")
    assert "reassignment stopped" in page.locator("#notice").inner_text()
    assert any("Stop the reassignment of orders-0" in d for d in page.dialogs)
    _eventually(lambda: scene.admin.metadata().partition("orders", 0).reassignment is None,
                "the reassignment to stop")  # fmt: skip
    page.goto(scene.url + "/reassignments")
    assert "none running" in page.locator("#running").inner_text()
    assert "stopped" in page.locator("#finished tbody tr").first.inner_text()


def test_a_rebalance_shows_its_progress_and_stops_from_the_page(
    scene: Scene, page: Any, artifacts: Path
) -> None:
    # orders-1 moves to node 2, which never reports in sync: the move stays in flight.
    move = api.RebalanceMoveBody(topic="orders", partition=1, original_replicas=[1],
                                 target_replicas=[2])  # fmt: skip
    scene.admin.start_rebalance(api.StartRebalance(proposal_id="ui-grow", moves=[move]))
    page.goto(scene.url + "/reassignments")
    _eventually(lambda: page.locator("#rebalance-state").inner_text() == "RUNNING",
                "the rebalance on the page")  # fmt: skip
    assert page.locator("#rebalance-id").inner_text() == "ui-grow"
    assert page.locator("#rebalance-progress").count() == 1
    _shot(page, artifacts, "rebalance")
    page.locator("form[action='/rebalance/stop'] button").click()
    page.wait_for_selector("#notice")
    assert "rebalance stopping" in page.locator("#notice").inner_text()
    assert any("Stop rebalance ui-grow" in d for d in page.dialogs)
    rebalance = scene.admin.metadata().rebalance
    assert rebalance is not None and rebalance.state.value == "STOPPING"
    # Stopping lets the move in flight finish; cancelling it ends the rebalance.
    scene.admin.alter_reassignments({("orders", 1): None})
    _eventually(lambda: scene.admin.metadata().rebalance.state.value == "STOPPED",  # type: ignore[union-attr]
                "the rebalance to stop")  # fmt: skip


def test_the_lag_chart_rises_when_the_consumer_stops(
    scene: Scene, page: Any, artifacts: Path
) -> None:
    member = ClassicProtocolMember(scene.bootstrap, GROUP, [EVENTS], offsets_partitions=4,
                                   client_id="ui-reader").start()  # fmt: skip
    assert member.wait_assigned(60)
    # The consumer keeps up: it commits the log end after each batch.
    for _ in range(3):
        scene.produce(20)
        member.commit({(EVENTS, p): _end(scene, p) for p in range(PARTITIONS)})
        time.sleep(0.4)
    page.goto(scene.url + f"/groups/{GROUP}")
    assert page.locator("#group-state").inner_text() == "Stable"
    assert page.locator("#members tbody tr").count() == 1
    assert "ui-reader" in page.locator("#members").inner_text()

    # The consumer stops; the producer does not.
    member.close()
    chart = page.locator("#lag-chart")
    seen: list[int] = []
    deadline = time.monotonic() + 60

    def rising() -> bool:
        return len(seen) >= 3 and seen[-1] > seen[-2] > seen[-3]

    while time.monotonic() < deadline and not rising():
        scene.produce(10)
        time.sleep(0.5)
        last = chart.get_attribute("data-last-lag")
        if last and (not seen or int(last) != seen[-1]):
            seen.append(int(last))
    assert rising(), f"lag the chart showed: {seen}"
    assert page.locator("#lag-chart canvas").count() >= 1
    page.reload()
    _eventually(lambda: page.locator("#group-state").inner_text() == "Empty", "an Empty group")
    assert int(page.locator("#total-lag").inner_text()) > 0
    page.wait_for_timeout(1200)  # two chart polls: the picture shows the rise
    _shot(page, artifacts, "group")
    page.goto(scene.url + "/groups")
    assert GROUP in page.locator("#group-table").inner_text()
    _shot(page, artifacts, "groups")


def test_the_lag_chart_reaches_back_into_the_views_warehouse(scene: Scene, page: Any) -> None:
    """Lag older than the daemon's ring comes from the views job's lag_history (a Delta table)."""
    if not _group_exists(scene):  # run alone: the group the chart test leaves behind
        _commit_as_a_member(scene, 0)
    # Written as the view job's sampler writes it, an hour before the daemon started.
    warehouse = Warehouse(scene.warehouse)
    recorder = LagRecorder(resolution_ms=60_000)
    now = int(time.time() * 1000)
    for minutes_ago, lag in ((60, 5), (45, 9), (30, 4)):
        at = now - minutes_ago * 60_000
        offsets = [(GROUP, EVENTS, p, 0, 100) for p in range(PARTITIONS)]
        ends = {(EVENTS, p): (at, 100 + lag) for p in range(PARTITIONS)}
        warehouse.commit({LAG_SAMPLES: recorder.rows(at, offsets, ends)}, schemas())
    page.goto(scene.url + f"/groups/{GROUP}")
    chart = page.locator("#lag-chart")
    _eventually(lambda: chart.get_attribute("data-stored") == "3", "stored lag in the chart")
    assert int(chart.get_attribute("data-points") or 0) > 3  # and the ring after them
    assert "lag_history view" in page.locator("#lag-source").inner_text()
    series = page.evaluate("url => fetch(url).then(r => r.json())", f"/groups/{GROUP}/lag.json")
    assert series["lag"][:3] == [15, 27, 12]  # summed over the three partitions
    assert series["t"][0] == pytest.approx((now - 60 * 60_000) / 1000, abs=60)


def _commit_as_a_member(scene: Scene, offset: int) -> None:
    member = ClassicProtocolMember(scene.bootstrap, GROUP, [EVENTS], offsets_partitions=4).start()
    assert member.wait_assigned(60)
    member.commit({(EVENTS, p): offset for p in range(PARTITIONS)})
    member.close()


def _group_exists(scene: Scene) -> bool:
    return any(g.group_id == GROUP for g in scene.groups.list_groups())


def _end(scene: Scene, partition: int) -> int:
    from kafkacoord.storage.watermarks import log_end_offsets

    return log_end_offsets(scene.bootstrap, [(EVENTS, partition)])[(EVENTS, partition)]


def test_a_reset_offsets_dry_run_changes_nothing_until_applied(scene: Scene, page: Any) -> None:
    committed = scene.groups.committed(GROUP)
    if not committed or any(p.offset == 0 for p in committed.values()):
        _commit_as_a_member(scene, 1)  # run alone, or after the warehouse test only
    before = {tp: p.offset for tp, p in scene.groups.committed(GROUP).items()}
    assert all(offset > 0 for offset in before.values())
    page.goto(scene.url + f"/groups/{GROUP}")
    page.select_option("#reset-form select[name=mode]", "earliest")
    page.locator("#dry-run").click()
    page.wait_for_selector("#reset-plan")
    assert "Dry run" in page.locator("#reset-plan h3").inner_text()
    plan = page.locator("#reset-plan tbody tr")
    assert plan.count() == PARTITIONS
    assert all(plan.nth(i).locator("td").nth(2).inner_text() == "0" for i in range(PARTITIONS))
    after_dry_run = {tp: p.offset for tp, p in scene.groups.committed(GROUP).items()}
    assert after_dry_run == before

    page.locator("#apply-reset").click()
    page.wait_for_selector("#reset-plan h3:has-text('Applied')")
    assert any("Reset the committed offsets" in d for d in page.dialogs)
    after = {tp: p.offset for tp, p in scene.groups.committed(GROUP).items()}
    assert after == dict.fromkeys(before, 0)


def test_markup_in_names_is_shown_as_text(scene: Scene, page: Any, artifacts: Path) -> None:
    # Kafka's topic-name rule refuses it before any page could show it...
    with pytest.raises(ValueError, match="should match pattern"):
        scene.admin.create_topic(XSS, 1, 1)
    # ...but group ids and client ids are free-form.
    scene.produce(1)
    errors = scene.groups.reset_offsets(XSS, {(EVENTS, 0): 1})
    assert all(code.name == "NONE" for code in errors.values())
    for path in ("/groups", f"/groups/{urllib.parse.quote(XSS, safe='')}",
                 f"/topics/{urllib.parse.quote(XSS, safe='')}"):  # fmt: skip
        page.goto(scene.url + path)
        assert XSS in page.locator("body").inner_text()
        # Only the console's three scripts exist; the name became text.
        assert page.locator("script").count() == 3
    page.goto(scene.url + "/groups")
    page.wait_for_timeout(500)
    assert not [d for d in page.dialogs if d.startswith("alert")]
    _shot(page, artifacts, "xss")


def test_history_lists_leadership_changes(scene: Scene, page: Any, artifacts: Path) -> None:
    # The topic page's election button: confirmed, then the CLI's ElectLeaders call.
    page.goto(scene.url + "/topics/orders")
    page.get_by_role("button", name="Elect preferred leaders").click()
    page.wait_for_selector("#notice")
    assert page.locator("#notice").inner_text().startswith("preferred leaders elected")
    assert any("Elect the preferred leader of every partition of orders" in d
               for d in page.dialogs)  # fmt: skip
    page.goto(scene.url + "/history")
    rows = page.locator("#history-table tbody tr")
    # Every partition's first leader is a change: orders' three and the shards' four.
    _eventually(lambda: rows.count() >= 7, "leadership history")
    text = page.locator("#history-table").inner_text()
    assert "orders-2" in text and "initial" in text
    _shot(page, artifacts, "history")


def test_a_write_is_refused_without_a_login(scene: Scene, anonymous: Any) -> None:
    anonymous.goto(scene.url + "/reassignments")
    assert anonymous.locator("#mode").inner_text() == "read-only"
    button = anonymous.locator("form[action='/leaders/elect'] button")
    assert button.is_disabled()
    assert button.get_attribute("title") == "log in as a console admin to write"
    # The page's own token does not make up for the login.
    csrf = anonymous.locator("input[name=csrf]").first.get_attribute("value")
    refused = anonymous.request.post(scene.url + "/leaders/elect", form={"csrf": csrf})
    assert refused.status == 403
    assert "log in as a console admin" in refused.text()


def test_logging_in_enables_writes_and_logging_out_ends_them(
    scene: Scene, anonymous: Any, artifacts: Path
) -> None:
    _log_in(anonymous, scene.url, "alice", "not her password")
    assert anonymous.locator("#login-error").inner_text() == "wrong user name or password"
    _shot(anonymous, artifacts, "login")
    _log_in(anonymous, scene.url, "alice", PASSWORDS["alice"])
    anonymous.wait_for_selector("#user")
    assert anonymous.locator("#user").inner_text() == "alice"
    assert anonymous.locator("#mode").inner_text() == "writes enabled"
    [cookie] = anonymous.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    anonymous.goto(scene.url + "/topics/orders")
    assert anonymous.get_by_role("button", name="Elect preferred leaders").is_enabled()
    anonymous.locator("#logout").click()
    anonymous.wait_for_selector("#login-link")
    assert anonymous.locator("#mode").inner_text() == "read-only"
    assert anonymous.context.cookies() == []


def test_a_reader_logs_in_but_may_not_write(scene: Scene, anonymous: Any) -> None:
    _log_in(anonymous, scene.url, "bob", PASSWORDS["bob"])
    anonymous.wait_for_selector("#user")
    anonymous.goto(scene.url + "/topics/orders")
    button = anonymous.get_by_role("button", name="Elect preferred leaders")
    assert button.is_disabled()
    assert button.get_attribute("title") == "bob is not a console admin (console_admins)"


def test_a_rebound_host_is_refused(scene: Scene, anonymous: Any) -> None:
    # rebound.example resolves to 127.0.0.1 (as a DNS-rebinding site's name would): the
    # browser reaches the console, and the console refuses the name.
    port = urllib.parse.urlsplit(scene.url).port
    response = anonymous.goto(f"http://{REBOUND}:{port}/")
    assert response is not None and response.status == 421
    assert "console_allowed_hosts" in anonymous.locator("body").inner_text()
    # The same console under its own address answers.
    assert anonymous.goto(scene.url + "/").status == 200


def test_a_group_as_of_an_instant_shows_its_offsets_then(
    scene: Scene, page: Any, artifacts: Path
) -> None:
    group = "audit-readers"
    committed = lambda: [  # noqa: E731
        page.locator("#offsets tbody tr").nth(i).locator("td").nth(2).inner_text() for i in range(2)
    ]
    first = scene.groups.reset_offsets(group, {(EVENTS, 0): 1, (EVENTS, 1): 2})
    assert set(first.values()) == {ErrorCode.NONE}
    time.sleep(0.3)
    noted = format_instant(int(time.time() * 1000))
    time.sleep(0.3)
    more = scene.groups.reset_offsets(group, {(EVENTS, 0): 3, (EVENTS, 1): 4})
    assert set(more.values()) == {ErrorCode.NONE}

    page.goto(scene.url + f"/groups/{group}")
    assert committed() == ["3", "4"]
    assert page.locator("#reset-form").count() == 1
    page.fill("#as-of-form input[name=as_of]", noted)
    page.locator("#as-of-form button").click()
    page.wait_for_selector("#as-of")
    assert noted.removesuffix("Z") in page.locator("#as-of").inner_text()
    assert committed() == ["1", "2"]
    assert page.locator("#reset-form").count() == 0  # the past is not reset
    _shot(page, artifacts, "group-as-of")
    page.locator("#as-of-form a", has_text="now").click()
    page.wait_for_url(f"**/groups/{group}")
    assert committed() == ["3", "4"]

    page.goto(scene.url + f"/groups/{group}?as_of=yesterday")
    assert "not an instant" in page.content()


def test_a_topic_as_of_an_instant_and_a_partitions_decisions(
    scene: Scene, page: Any, artifacts: Path
) -> None:
    scene.admin.create_topic("audit", replica_assignment={0: [1, 2]})
    leader = lambda: (v := scene.admin.metadata().partition("audit", 0)) and v.leader  # noqa: E731
    _eventually(lambda: leader() == 1, "audit-0 led by node 1")
    time.sleep(1.05 - time.time() % 1)  # into the next second: it starts after the above
    before = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
    time.sleep(1.1)  # the instant above is whole seconds: nothing after it within them
    scene.admin.alter_reassignments({("audit", 0): [2, 1]})  # node 2 becomes preferred
    _eventually(lambda: scene.admin.metadata().partition("audit", 0).replicas == (2, 1),  # type: ignore[union-attr]
                "audit-0 reordered")  # fmt: skip
    scene.admin.elect_leaders("preferred", [("audit", 0)])
    _eventually(lambda: leader() == 2, "audit-0 led by node 2")

    page.goto(scene.url + "/topics/audit")
    assert page.locator("#partition-table tbody tr").nth(0).locator("td").nth(2).inner_text() == "2"
    page.fill("#as-of-form input[name=as_of]", before)
    page.locator("#as-of-form button").click()
    page.wait_for_selector("#as-of")
    assert before.removesuffix("Z") in page.locator("#as-of").inner_text()
    assert page.locator("#partition-table tbody tr").nth(0).locator("td").nth(2).inner_text() == "1"
    assert page.get_by_role("button", name="Elect preferred leaders").count() == 0  # the past
    _shot(page, artifacts, "topic-as-of")

    page.get_by_role("link", name="0", exact=True).click()
    page.wait_for_url("**/topics/audit/0")
    rows = page.locator("#timeline tbody tr")
    newest, oldest = rows.nth(0).inner_text(), rows.nth(rows.count() - 1).inner_text()
    assert "leader 1 → 2" in newest and "ElectLeaders by" in newest, newest
    assert "the preferred replica" in newest, newest
    assert "created on replicas [1,2], leader 1" in oldest and "the topic was created" in oldest
    _shot(page, artifacts, "partition")

    page.goto(scene.url + "/topics/audit?as_of=yesterday")
    assert "not an instant" in page.content()
