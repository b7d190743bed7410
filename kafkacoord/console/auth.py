"""Who may use the console: configured users (argon2 hashes), sessions, login rate limits.

Sessions live in this daemon's memory (a restart logs everyone out): the cookie holds
only a random token, so logging out really ends a session. Failed logins are counted
per client address and per user name; past the limit a login is refused unchecked
until the window passes.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = ["LoginLimiter", "Session", "Sessions", "Users", "hash_password"]

_HASHER = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash for ``console_users`` (``kafkacoord console hash-password``)."""
    return _HASHER.hash(password)


class Users:
    """The configured users; ``admins`` may write."""

    def __init__(self, hashes: Mapping[str, str], admins: Collection[str] = ()) -> None:
        self._hashes = dict(hashes)
        self.admins = frozenset(admins)
        # An unknown name still costs one verification: timing does not tell names apart.
        self._decoy = _HASHER.hash(secrets.token_urlsafe(16))

    def __bool__(self) -> bool:
        return bool(self._hashes)

    def verify(self, name: str, password: str) -> bool:
        stored = self._hashes.get(name)
        try:
            return _HASHER.verify(stored or self._decoy, password) and stored is not None
        except (VerificationError, InvalidHashError):
            return False

    def is_admin(self, name: str | None) -> bool:
        return name is not None and name in self.admins


@dataclass(frozen=True, slots=True)
class Session:
    user: str
    expires: float


class Sessions:
    """Random tokens to users, each until ``max_age_s`` after its login; at most
    ``capacity`` at once (the oldest go first)."""

    def __init__(
        self,
        max_age_s: float,
        *,
        capacity: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age_s = max_age_s
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._table: OrderedDict[str, Session] = OrderedDict()

    def create(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._table) >= self._capacity:
                self._table.popitem(last=False)
            self._table[token] = Session(user, self._clock() + self.max_age_s)
        return token

    def user(self, token: str | None) -> str | None:
        if not token:
            return None
        with self._lock:
            session = self._table.get(token)
            if session is None:
                return None
            if session.expires <= self._clock():
                del self._table[token]
                return None
            return session.user

    def end(self, token: str | None) -> None:
        with self._lock:
            self._table.pop(token or "", None)


class LoginLimiter:
    """At most ``max_failures`` failed logins per key in a fixed window of ``window_s``.

    Bounded: at most ``capacity`` keys are tracked (the oldest windows go first). Not
    the ``limits`` package: its memory storage runs an expiry thread of its own.
    """

    def __init__(
        self,
        max_failures: int = 5,
        window_s: float = 300.0,
        *,
        capacity: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def retry_after(self, keys: Collection[str]) -> float:
        """Seconds until a login for these keys is checked again (0: now)."""
        now = self._clock()
        wait = 0.0
        with self._lock:
            for key in keys:
                started, failures = self._windows.get(key, (now, 0))
                if now - started >= self.window_s:
                    self._windows.pop(key, None)
                elif failures >= self.max_failures:
                    wait = max(wait, started + self.window_s - now)
        return wait

    def failed(self, keys: Collection[str]) -> None:
        now = self._clock()
        with self._lock:
            for key in keys:
                started, failures = self._windows.pop(key, (now, 0))
                if now - started >= self.window_s:
                    started, failures = now, 0
                self._windows[key] = (started, failures + 1)
            while len(self._windows) > self._capacity:
                self._windows.popitem(last=False)

    def succeeded(self, keys: Collection[str]) -> None:
        """Forget these keys' failures (a user's own, after that user logs in)."""
        with self._lock:
            for key in keys:
                self._windows.pop(key, None)
