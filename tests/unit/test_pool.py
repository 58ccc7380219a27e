"""The host pool both isolated runtimes share: keyed reuse, the warm spare, and when a host is not reused."""

from __future__ import annotations

import pytest

from litmus_replay.envs.errors import EnvError
from litmus_replay.envs.runtimes.pool import Pool, PooledWorld, open_on


class FakeClient:
    def __init__(self):
        self.broken = False
        self.requests: list[str] = []

    def request(self, op, timeout=None, **fields):
        self.requests.append(op)
        if op == "call" and fields["request"]["tool"] == "hang":
            from litmus_replay.envs.client import CallTimeout

            self.broken = True
            raise CallTimeout("no answer")
        return {"status": "ok"} if op == "call" else {}


class FakeHost:
    def __init__(self, key):
        self.key = key
        self.client = FakeClient()
        self.tainted = False
        self.worlds = 0
        self.stopped = False
        self.dead = False

    def alive(self):
        return not (self.stopped or self.dead)


@pytest.fixture
def made():
    return []


def _pool(made, **options):
    def start(key):
        host = FakeHost(key)
        made.append(host)
        return host

    def stop(host):
        assert not host.stopped, "a host is stopped once"
        host.stopped = True

    return Pool(start, stop, **{"idle": 2, **options})


def test_a_closed_world_hands_its_host_to_the_next_world_of_the_same_key_only(made):
    pool = _pool(made)
    first = pool.take("a")
    pool.give_back("a", first)
    assert first.client.requests == ["close"] and not first.stopped
    assert pool.take("b") is not first
    assert pool.take("a") is first


def test_idle_hosts_beyond_the_limit_are_stopped_least_recently_used_first(made):
    pool = _pool(made, idle=2)
    hosts = [pool.take(key) for key in ("a", "b", "c")]
    for key, host in zip(("a", "b", "c"), hosts):
        pool.give_back(key, host)
    assert [h.stopped for h in hosts] == [True, False, False]


@pytest.mark.parametrize("spoil", ["tainted", "broken", "dead"])
def test_a_spoiled_host_is_never_reused(made, spoil):
    pool = _pool(made)
    host = pool.take("a")
    if spoil == "tainted":
        host.tainted = True
    elif spoil == "broken":
        host.client.broken = True
    else:
        host.dead = True
    pool.give_back("a", host)
    assert host.stopped and pool.take("a") is not host


def test_a_host_retires_after_its_quota_of_worlds(made):
    pool = _pool(made, max_worlds=2)
    host = pool.take("a")
    pool.give_back("a", host)
    assert pool.take("a") is host
    pool.give_back("a", host)
    assert host.stopped and pool.take("a") is not host


def test_the_warm_spare_serves_the_next_world_of_its_key(made):
    pool = _pool(made, idle=0, warm=True)
    first = pool.take("a")
    spare = made[-1]
    assert spare is not first and spare.key == "a"
    assert pool.take("a") is spare
    other = pool.take("b")
    assert other.key == "b" and spare.key == "a"


def test_a_world_that_loses_its_server_stops_its_host_at_once_and_a_tainting_call_spoils_it(made):
    pool = _pool(made)
    world = open_on(pool, "a", lambda host: None, 1.0, frozenset({"run_command"}))
    assert isinstance(world, PooledWorld)
    world.call({"tool": "run_command"})
    assert world.host.tainted
    with pytest.raises(EnvError):
        world.call({"tool": "hang"})
    assert world.host.stopped
    world.close()  # nothing left to give back


def test_a_failed_load_gives_a_healthy_host_back_or_stops_it(made):
    pool = _pool(made)

    def bad_spec(host):
        raise EnvError("world.files: bad")

    with pytest.raises(EnvError):
        open_on(pool, "a", bad_spec, 1.0, frozenset())
    assert not made[0].stopped and pool.idle == 1
    with pytest.raises(EnvError):
        open_on(pool, "a", bad_spec, 1.0, frozenset(), keep_after_bad_load=False)
    assert made[0].stopped


def test_draining_returns_every_host_and_refuses_new_worlds(made):
    pool = _pool(made, warm=True)
    taken = pool.take("a")
    assert set(map(id, pool.drain())) == {id(taken), id(made[-1])}
    with pytest.raises(EnvError):
        pool.take("a")
