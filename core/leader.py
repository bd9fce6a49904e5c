"""Leader election on a ``coordination.k8s.io/v1`` Lease, with fencing by the renew deadline.

The rules are client-go's (``k8s.io/client-go/tools/leaderelection``):

* **Acquire** by creating the Lease, or by replacing it (resourceVersion precondition, so two
  candidates cannot both win) when it is free (no holder: released) or expired. Expired is judged
  by *our* clock: the record must not have changed for ``leaseDurationSeconds`` since we first saw
  it as it is. The remote ``renewTime`` is never compared with our clock (clocks differ).
* **Renew** every retry period. Leadership is valid for ``renew_deadline`` after the moment we
  *sent* the last successful write; others cannot take over before ``lease_duration`` after they
  saw that write, which is later. ``renew_deadline < lease_duration`` leaves the difference for
  writes already on their way.
* **Fence**: :meth:`Election.leading` is what :attr:`core.kube.Kube.fence` asks before every write,
  so a leader that failed to renew in time (a network partition, a paused process) writes nothing
  from its renew deadline on, whatever its loop is doing. It does not renew either: it has lost,
  and the process exits to come back as a standby.
* **Release** on a clean stop: the holder is cleared, and a standby takes over on its next try
  instead of waiting for the lease to expire.

:class:`Election` is the pure state machine (clock passed in); :class:`Elector` drives it against a
:class:`LeaseStore` (the API server's, :class:`KubeLeaseStore`).

No maintained asyncio implementation fits: kubernetes_asyncio's ``leaderelection`` judges expiry
by comparing wall clocks across machines, never releases, and has no fence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple, Protocol

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from sparkop.core.jsontypes import JSON
from sparkop.core.requester import Requester
from sparkop.core.times import format_micro_time, parse_time

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# client-go's JitterFactor: candidates retry at 1x to 2.2x the retry period, so they do not all
# ask at the same instant; the renew deadline must leave room for that.
JITTER_FACTOR: Final = 1.2


def default_namespace(service_account_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The namespace the pod runs in, else ``default``."""
    try:
        return service_account_file.read_text().strip() or "default"
    except OSError:
        return "default"


def default_identity() -> str:
    """Unique per process: a restarted pod keeps its hostname but must not inherit a lease."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("--leader-elect-identity must not be empty")
        if self.retry_period <= 0:
            raise ValueError("--leader-elect-retry-period must be positive")
        if self.lease_duration < 1:
            raise ValueError("--leader-elect-lease-duration must be at least 1s (the Lease counts whole seconds)")
        if not self.renew_deadline < self.lease_duration:
            raise ValueError(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration: a leader must"
                " stop writing before another replica may take over"
            )
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"--leader-elect-renew-deadline must exceed {JITTER_FACTOR} x --leader-elect-retry-period,"
                " so that a renewal can be retried before the deadline"
            )


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of a Lease that election uses; ``holder`` None or empty when released."""

    holder: str | None
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str = ""


class Intent(NamedTuple):
    """A write the candidate wants: ``record`` to create, or to replace the observed version with."""

    record: LeaseRecord
    create: bool


@dataclass
class Election:
    """The state of one candidate. ``now`` arguments are a monotonic clock in seconds; ``wall`` is
    only written into the Lease for people to read, never compared."""

    config: ElectionConfig
    observed: LeaseRecord | None = None
    observed_at: float = 0.0  # when the observed record last changed, by our clock
    renewed_at: float | None = None  # when the last successful write of ours was sent
    has_led: bool = False

    def observe(self, record: LeaseRecord | None, now: float) -> None:
        if record != self.observed:
            self.observed, self.observed_at = record, now

    def holds(self) -> bool:
        return self.observed is not None and self.observed.holder == self.config.identity

    def leading(self, now: float) -> bool:
        """Whether this candidate may write now: it holds the lease and renewed it within the
        renew deadline."""
        return self.holds() and self.renewed_at is not None and now < self.renewed_at + self.config.renew_deadline

    def lost(self, now: float) -> bool:
        """Whether it led and no longer may: for good (the process restarts as a standby)."""
        return self.has_led and not self.leading(now)

    def expired(self, now: float) -> bool:
        """Whether someone else's observed lease may be taken: released, or unchanged for its whole
        duration by our clock."""
        record = self.observed
        if record is None or not record.holder:
            return True
        return now >= self.observed_at + record.lease_duration_seconds

    def expires_in(self, now: float) -> float:
        """Seconds until someone else's observed lease may be taken (0 or less: now)."""
        record = self.observed
        if record is None or not record.holder or self.holds():
            return 0.0
        return self.observed_at + record.lease_duration_seconds - now

    def intent(self, now: float, wall: datetime) -> Intent | None:
        """What to write now, or None: someone else holds a valid lease, or we lost ours."""
        if self.lost(now):
            return None
        record = self.observed
        seconds = max(1, round(self.config.lease_duration))
        if record is None:
            return Intent(LeaseRecord(self.config.identity, seconds, wall, wall, 0), create=True)
        if self.holds():
            renewal = dataclasses.replace(record, lease_duration_seconds=seconds, renew_time=wall)
            return Intent(renewal, create=False)
        if not self.expired(now):
            return None
        taken = LeaseRecord(self.config.identity, seconds, wall, wall, record.transitions + 1, record.resource_version)
        return Intent(taken, create=False)

    def wrote(self, record: LeaseRecord, sent_at: float, now: float) -> None:
        """Our write (sent at ``sent_at``) succeeded and the Lease is now ``record``."""
        self.observed, self.observed_at = record, now
        if record.holder == self.config.identity:
            self.renewed_at = sent_at
            self.has_led = self.has_led or self.leading(now)

    def release(self, wall: datetime) -> LeaseRecord | None:
        """The record that gives the lease up (holder cleared, like client-go, a 1 s duration), or
        None if we do not hold it."""
        if not self.holds() or self.observed is None:
            return None
        return dataclasses.replace(
            self.observed, holder=None, lease_duration_seconds=1, acquire_time=wall, renew_time=wall
        )


class LeaseConflict(Exception):
    """The Lease changed since it was read (or appeared / vanished): look again."""


class LeaseStore(Protocol):
    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        """Write ``record`` if the Lease is still at ``record.resource_version``."""
        ...


class KubeLeaseStore:
    """One Lease, read and written on the one request path (``core.kube.Kube.request``), which is
    not fenced: a standby must be able to acquire."""

    def __init__(self, requester: Requester, namespace: str, name: str) -> None:
        self.requester = requester
        self.namespace = namespace
        self.name = name

    @property
    def _collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def get(self) -> LeaseRecord | None:
        status, lease = await self._send("GET", f"{self._collection}/{self.name}", ok_absent=True)
        return None if status == 404 else _record(lease)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        status, lease = await self._send("POST", self._collection, self._body(record), conflicts=(409,))
        if status == 409:
            raise LeaseConflict(f"lease {self.namespace}/{self.name} was created by someone else")
        return _record(lease)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        path = f"{self._collection}/{self.name}"
        status, lease = await self._send("PUT", path, self._body(record), conflicts=(404, 409))
        if status in (404, 409):
            raise LeaseConflict(f"lease {self.namespace}/{self.name} changed since it was read")
        return _record(lease)

    async def _send(
        self,
        method: str,
        path: str,
        body: JSON | None = None,
        *,
        ok_absent: bool = False,
        conflicts: tuple[int, ...] = (),
    ) -> tuple[int, JSON]:
        """(status, decoded answer); ApiException for an answer that is neither 2xx nor expected."""
        # Bounded by the Elector (its renew deadline), not here.
        response = await self.requester.request(method, path, body=body)
        try:
            data = await response.read()
        finally:
            response.release()
        if response.status in conflicts or (ok_absent and response.status == 404):
            return response.status, {}
        if not 200 <= response.status < 300:
            error = ApiException(status=response.status, reason=response.reason)
            error.body = data
            raise error
        decoded = json.loads(data) if data else {}
        return response.status, decoded if isinstance(decoded, dict) else {}

    def _body(self, record: LeaseRecord) -> JSON:
        meta: JSON = {"name": self.name, "namespace": self.namespace}
        if record.resource_version:
            meta["resourceVersion"] = record.resource_version
        spec = {
            "holderIdentity": record.holder or None,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "leaseTransitions": record.transitions,
            "acquireTime": _micro_time(record.acquire_time),
            "renewTime": _micro_time(record.renew_time),
        }
        # As the generated client sent it: unset fields left out.
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {k: v for k, v in spec.items() if v is not None},
        }


def _micro_time(value: datetime | None) -> str | None:
    # The API server's MicroTime demands six sub-second digits.
    return None if value is None else format_micro_time(value)


def _record(lease: JSON) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or None,
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=parse_time(spec.get("acquireTime")),
        renew_time=parse_time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )


TRANSIENT: Final = (ApiException, aiohttp.ClientError, TimeoutError, ConnectionError)


@dataclass
class Elector:
    """Runs an :class:`Election`: :meth:`run` acquires, then renews until the lease is lost (then
    :attr:`lost_reason` is set and :attr:`lost` fires) or it is cancelled; :meth:`release` gives the
    lease up on a clean stop."""

    config: ElectionConfig
    store: LeaseStore
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = lambda: datetime.now(UTC)
    jitter: Callable[[], float] = lambda: random.uniform(1.0, JITTER_FACTOR)
    election: Election = field(init=False)
    leading_event: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    lost: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    lost_reason: str | None = field(default=None, init=False)
    last_read_at: float | None = field(default=None, init=False)  # the last time the API server answered
    last_error: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.election = Election(self.config)

    def fence(self) -> bool:
        """May this replica write now? (For :attr:`core.kube.Kube.fence`.)"""
        return self.election.leading(self.clock())

    @property
    def leader(self) -> str | None:
        """The holder as last observed."""
        return self.election.observed.holder if self.election.observed else None

    async def run(self) -> None:
        config = self.config
        log.info("leader election: %s is a candidate for lease %s/%s", config.identity, config.namespace, config.name)
        while not self.election.leading(self.clock()):
            await self._attempt(bound=config.renew_deadline)
            if not self.election.leading(self.clock()):
                # Try again after the retry period, or at the moment the holder's lease expires if
                # that is sooner: a SIGKILLed leader is replaced as soon as the rules allow.
                expires_in = self.election.expires_in(self.clock())
                await asyncio.sleep(min(config.retry_period * self.jitter(), max(expires_in, 0.0) + 0.01))
        self.leading_event.set()
        observed = self.election.observed
        log.info(
            "leader election: %s leads (lease %s/%s, transitions %d)",
            config.identity,
            config.namespace,
            config.name,
            observed.transitions if observed else 0,
        )
        while True:
            await asyncio.sleep(config.retry_period)
            renewed_at = self.election.renewed_at if self.election.renewed_at is not None else self.clock()
            remaining = renewed_at + config.renew_deadline - self.clock()
            if remaining > 0:
                await self._attempt(bound=remaining)
            now = self.clock()
            if not self.election.leading(now):
                self._lose(now)
                return

    def _lose(self, now: float) -> None:
        holder = self.leader
        if holder != self.config.identity:
            reason = f"the lease is held by {holder or 'nobody'} now"
        else:
            renewed_at = self.election.renewed_at
            ago = now - (renewed_at if renewed_at is not None else now)
            reason = (
                f"not renewed within the renew deadline of {self.config.renew_deadline:g}s"
                f" (last renewed {ago:.1f}s ago; last error: {self.last_error or 'none'})"
            )
        self.lost_reason = reason
        log.error(
            "leader election: %s lost lease %s/%s: %s",
            self.config.identity,
            self.config.namespace,
            self.config.name,
            reason,
        )
        self.lost.set()

    async def _attempt(self, *, bound: float) -> None:
        """One read and, if the election wants it, one write, all within ``bound`` seconds."""
        try:
            async with asyncio.timeout(bound):
                record = await self.store.get()
                self.last_read_at = self.clock()
                self.election.observe(record, self.clock())
                intent = self.election.intent(self.clock(), self.wall())
                if intent is None:
                    return
                sent_at = self.clock()
                written = await (
                    self.store.create(intent.record) if intent.create else self.store.replace(intent.record)
                )
                self.election.wrote(written, sent_at, self.clock())
                self.last_error = None
        except LeaseConflict as exc:
            log.debug("leader election: %s", exc)
        except TRANSIENT as exc:
            self.last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
            log.warning("leader election: lease %s/%s: %s", self.config.namespace, self.config.name, self.last_error)

    async def release(self) -> bool:
        """Give the lease up if we still validly hold it (call after every writer has stopped)."""
        now = self.clock()
        if not self.election.leading(now):
            if self.election.holds():
                log.warning(
                    "leader election: %s did not release lease %s/%s: not renewed within the renew deadline; "
                    "the next leader waits for it to expire",
                    self.config.identity,
                    self.config.namespace,
                    self.config.name,
                )
            return False
        released = self.election.release(self.wall())
        if released is None:
            return False
        try:
            renewed_at = self.election.renewed_at if self.election.renewed_at is not None else now
            async with asyncio.timeout(max(0.1, renewed_at + self.config.renew_deadline - now)):
                written = await self._give_up(released)
        except (LeaseConflict, *TRANSIENT) as exc:
            log.warning(
                "leader election: could not release the lease (%s); the next leader waits for it to expire", exc
            )
            return False
        self.election.observe(written, self.clock())
        log.info(
            "leader election: %s released lease %s/%s", self.config.identity, self.config.namespace, self.config.name
        )
        return True

    async def _give_up(self, released: LeaseRecord) -> LeaseRecord:
        try:
            return await self.store.replace(released)
        except LeaseConflict:
            # A renewal cut short by the stop may have been written all the same, its answer never read:
            # the Lease moved on under our own name. Still ours, that version is given up; anyone
            # else's is left alone.
            self.election.observe(await self.store.get(), self.clock())
            again = self.election.release(self.wall())
            if again is None:
                raise
            return await self.store.replace(again)
