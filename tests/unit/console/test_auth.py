"""Console users, sessions and the login rate limit."""

from __future__ import annotations

from kafkacoord.console.auth import LoginLimiter, Sessions, Users, hash_password


def test_users_verify_argon2_hashes_and_know_their_admins() -> None:
    users = Users({"alice": hash_password("wonderland"), "bob": hash_password("builder")},
                  admins=["alice"])  # fmt: skip
    assert users.verify("alice", "wonderland")
    assert not users.verify("alice", "builder")
    assert not users.verify("carol", "wonderland")
    assert users.is_admin("alice") and not users.is_admin("bob") and not users.is_admin(None)
    assert not Users({"x": "not a hash"}).verify("x", "not a hash")
    assert not Users({})


def test_a_session_lasts_until_it_expires_or_ends() -> None:
    now = [0.0]
    sessions = Sessions(60, clock=lambda: now[0])
    token = sessions.create("alice")
    assert sessions.user(token) == "alice"
    assert sessions.user("forged") is None and sessions.user(None) is None
    now[0] = 59.0
    assert sessions.user(token) == "alice"
    now[0] = 60.0
    assert sessions.user(token) is None
    other = sessions.create("bob")
    sessions.end(other)
    assert sessions.user(other) is None


def test_sessions_are_bounded_oldest_first() -> None:
    sessions = Sessions(60, capacity=3)
    tokens = [sessions.create(f"u{i}") for i in range(4)]
    assert sessions.user(tokens[0]) is None
    assert [sessions.user(t) for t in tokens[1:]] == ["u1", "u2", "u3"]


def test_failed_logins_are_limited_per_key_within_a_window() -> None:
    now = [0.0]
    limiter = LoginLimiter(max_failures=3, window_s=60, clock=lambda: now[0])
    keys = ("client:1.2.3.4", "user:alice")
    for _ in range(3):
        assert limiter.retry_after(keys) == 0
        limiter.failed(keys)
    now[0] = 10.0
    assert limiter.retry_after(keys) == 50.0
    # Another user from the same client is held too; the same user from elsewhere also.
    assert limiter.retry_after(("client:1.2.3.4", "user:bob")) == 50.0
    assert limiter.retry_after(("client:5.6.7.8", "user:alice")) == 50.0
    assert limiter.retry_after(("client:5.6.7.8", "user:bob")) == 0
    now[0] = 60.0
    assert limiter.retry_after(keys) == 0
    limiter.failed(keys)
    limiter.succeeded(["user:alice"])
    assert limiter.retry_after(["user:alice"]) == 0


def test_the_limiter_forgets_the_oldest_keys_past_its_capacity() -> None:
    limiter = LoginLimiter(max_failures=1, window_s=60, capacity=2)
    for key in ("a", "b", "c"):
        limiter.failed([key])
    assert limiter.retry_after(["a"]) == 0
    assert limiter.retry_after(["b"]) > 0 and limiter.retry_after(["c"]) > 0
