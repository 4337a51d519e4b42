"""The commit policy: when a writer that lost to a concurrent commit tries again, and for how long.

Every writer goes through one loop, `retry`:

- Transaction.commit (transaction.py), for every commit of every writer: a lost put-if-absent race
  for a version file is tried again on the version after the newest, once the versions committed
  meanwhile passed the protocol's conflict rules (Transaction._check_conflicts).
- `replan`, for the callers that plan their work again when their transaction cannot be rebased
  (DELETE, a write whose new table another job created, a companion sync).
- the state writer's race for a state version (core/log/maintenance/state_writer.py).

Retries go on for a time budget (`transaction.retry.timeBudgetMs`, 120 s), not a count: with 8
writers appending while both cores were busy, appends that could not conflict lost 10 races in a
row and gave up (RELIABILITY.md, "Load"). `maxAttempts`, when set, caps the attempts too. The first
retry is at once (the loser has just read the newest version); then waits double from
`baseDelayMs` to `maxDelayMs`, each cut by a random share of up to `jitter` so that writers that
lost together do not come back together. A conflict the rules refuse is raised at once, never retried.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from indextables_spark.config.options import PREFIX, Options
from indextables_spark.config.registry import registered_default
from indextables_spark.errors import CommitRetriesExhaustedError, ConcurrentModificationError, InvalidOptionError

log = logging.getLogger(__name__)

T = TypeVar("T")
TRANSACTION = "transaction.retry"
MAX_DOUBLINGS = 30  # past this the delay is long capped: keeps 2**n small


@dataclass(frozen=True)
class CommitPolicy:
    """How long and how often a writer tries again (from options: `from_options`)."""

    time_budget_ms: int = registered_default(TRANSACTION + ".timeBudgetMs")
    base_delay_ms: int = registered_default(TRANSACTION + ".baseDelayMs")
    max_delay_ms: int = registered_default(TRANSACTION + ".maxDelayMs")
    max_attempts: int | None = None  # a cap on top of the budget, when set
    jitter: float = 0.5  # the share of a delay that may be cut at random
    options: str = TRANSACTION  # the options' prefix (`<options>.timeBudgetMs`), named by the error
    cap_key: str = TRANSACTION + ".maxAttempts"  # the option of max_attempts, named by the error

    @classmethod
    def from_options(cls, o: Options, prefix: str = TRANSACTION, cap_key: str | None = None) -> CommitPolicy:
        """`<prefix>.timeBudgetMs`, `.baseDelayMs`, `.maxDelayMs` and the cap `cap_key` (default
        `<prefix>.maxAttempts`; unset: none)."""
        cap_key = cap_key or f"{prefix}.maxAttempts"
        budget, base, top = (o.get_int(f"{prefix}.{k}") for k in ("timeBudgetMs", "baseDelayMs", "maxDelayMs"))
        for k, v in (("timeBudgetMs", budget), ("baseDelayMs", base), ("maxDelayMs", top)):
            if v < 0:
                raise InvalidOptionError(f"option '{PREFIX}{prefix}.{k}' must be at least 0, got {v}")
        cap = o.get_int(cap_key, None)
        if cap is not None and cap < 1:
            raise InvalidOptionError(f"option '{PREFIX}{cap_key}' must be at least 1 (or unset), got {cap}")
        return cls(budget, base, top, cap, options=prefix, cap_key=cap_key)

    def delay_s(self, attempt: int, draw: float) -> float:
        """Seconds to wait before attempt `attempt` (2, 3, …); `draw` in [0, 1) picks the jitter."""
        if attempt <= 2:
            return 0.0
        raw = min(float(self.max_delay_ms), self.base_delay_ms * 2.0 ** min(attempt - 3, MAX_DOUBLINGS))
        return raw * (1.0 - self.jitter * draw) / 1000.0


@dataclass(frozen=True)
class Lost:
    """An attempt that lost to a concurrent commit and may be tried again: what happened."""

    reason: str
    error: BaseException | None = None


@dataclass(frozen=True)
class Tried(Generic[T]):
    """What `retry` returns: the attempt's value, how many attempts, how long they took in all."""

    value: T
    attempts: int
    elapsed_s: float
    waited_s: float


def retry(
    policy: CommitPolicy,
    attempt: Callable[[int], T | Lost],
    table: str,
    operation: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    draw: Callable[[], float] = random.random,
) -> Tried[T]:
    """Call attempt(1), attempt(2), … until one returns a value (not Lost) or raises; gives up with
    CommitRetriesExhaustedError once the budget (or the cap) is spent. The last wait is cut to the
    budget, so the last attempt is made at its end."""
    start = clock()
    waited = 0.0
    n = 0
    while True:
        n += 1
        got = attempt(n)
        if not isinstance(got, Lost):
            return Tried(got, n, clock() - start, waited)
        elapsed = clock() - start
        budget = policy.time_budget_ms / 1000.0
        if (policy.max_attempts is not None and n >= policy.max_attempts) or elapsed >= budget:
            raise gave_up(policy, table, operation, n, elapsed, got) from got.error
        wait = min(policy.delay_s(n + 1, draw()), budget - elapsed)
        log.debug("%s on %s lost attempt %d (%s); again in %.0f ms", operation, table, n, got.reason, wait * 1000)
        sleep(wait)
        waited += wait


def gave_up(
    policy: CommitPolicy, table: str, operation: str, attempts: int, elapsed: float, last: Lost
) -> CommitRetriesExhaustedError:
    """The error of a writer out of budget: the table, the operation, the attempts, the time, the option."""
    capped = policy.max_attempts is not None and attempts >= policy.max_attempts
    raise_it = (
        f"{PREFIX}{policy.cap_key} (now {policy.max_attempts}; unset it to retry for "
        f"{PREFIX}{policy.options}.timeBudgetMs)"
        if capped
        else f"{PREFIX}{policy.options}.timeBudgetMs (now {policy.time_budget_ms} ms)"
    )
    return CommitRetriesExhaustedError(
        f"{operation} on {table}: gave up after {attempts} attempts in {elapsed:.1f} s because of concurrent "
        f"commits (last: {last.reason}); nothing was committed. To wait longer, raise {raise_it}",
        table_path=table,
        operation=operation,
        attempts=attempts,
        elapsed_s=elapsed,
    )


def replan(
    policy: CommitPolicy,
    attempt: Callable[[int], T],
    table: str,
    operation: str,
    retryable: Callable[[ConcurrentModificationError], bool] = lambda e: True,
) -> T:
    """Run `attempt` (plan, stage and commit; given its number) again while it raises a conflict
    `retryable` accepts, under `policy`. A commit that spent its own budget is not planned again."""

    def once(n: int) -> T | Lost:
        try:
            return attempt(n)
        except CommitRetriesExhaustedError:
            raise
        except ConcurrentModificationError as e:
            if not retryable(e):
                raise
            log.info("%s on %s conflicted with a concurrent commit (%s); planning again", operation, table, e)
            return Lost(str(e), e)

    return retry(policy, once, table, operation).value
