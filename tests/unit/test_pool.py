"""The host pool both isolated runtimes share: keyed reuse, the warm spare, and when a host is not reused."""

from __future__ import annotations

import contextlib

import pytest

from litmus_replay.envs.errors import EnvError
from litmus_replay.envs.runtimes.pool import Pool, PooledWorld, begin_on, open_on


class FakeClient:
    def __init__(self):
        self.broken = False
        self.failing_close = False
        self.requests: list[str] = []

    def request(self, op, timeout=None, **fields):
        self.requests.append(op)
        if op == "call" and fields["request"]["tool"] == "hang":
            from litmus_replay.envs.client import CallTimeout

            self.broken = True
            raise CallTimeout("no answer")
        if op == "close" and self.failing_close:
            raise EnvError("close: the world would not tear down")
        return {"call": {"status": "ok"}, "report": {"reports": {}}}.get(op, {})

    def send(self, op, timeout=None, **fields):
        """Sent now, its answer (or error) given when asked for (as the real client's ``Reply``)."""
        try:
            return Answer(self.request(op, timeout, **fields), None)
        except EnvError as exc:
            return Answer(None, exc)


    def send_each(self, op, messages, timeout=None):
        return [self.send(op, timeout, **fields) for fields in messages]

    @contextlib.contextmanager
    def corked(self):
        yield  # each request is answered as it is sent here


class Answer:
    def __init__(self, value, error):
        self._value, self._error = value, error

    def result(self):
        if self._error is not None:
            raise self._error
        return self._value


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


def test_a_host_retires_once_worn_out(made):
    pool = _pool(made, retire=lambda host: host.worlds >= 2)
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


def test_a_new_spare_is_sent_its_warm_up_and_not_used_if_that_failed(made):
    pool = _pool(made, idle=0, warm=True)
    warmed, fail = [], []

    def warm(key, host):
        warmed.append(host)
        host.client.failing_close = bool(fail)
        return host.client.send("close")  # stands for the warm-up's last reply

    first = pool.take("a", warm)
    spare = made[-1]
    assert warmed == [spare] and first is not spare  # only the spare is warmed: a world's own load follows
    fail.append(True)
    assert pool.take("a", warm) is spare and not spare.stopped
    failed = made[-1]
    assert warmed[-1] is failed
    taken = pool.take("a")
    assert failed.stopped and taken is not failed  # a spare whose warm-up failed hosts no world


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


def test_calls_sent_ahead_taint_as_they_are_sent_and_a_lost_server_stops_the_host_as_its_outcome_is_read(made):
    pool = _pool(made)
    pending = begin_on(pool, "a", lambda host: lambda: None, 1.0, frozenset({"run_command"}))
    outcomes = pending.call_each([{"tool": "read"}, {"tool": "run_command"}, {"tool": "hang"}], then_report=True)
    (host,) = made
    assert host.tainted and host.client.requests == ["call", "call", "call"]  # the server lost: no report sent
    world = pending.result()
    assert next(outcomes) == {"status": "ok"} and next(outcomes) == {"status": "ok"} and not host.stopped
    assert isinstance(next(outcomes), EnvError) and host.stopped
    world.close()


def test_a_report_sent_behind_the_calls_answers_the_worlds_report_unless_a_call_came_after(made):
    pool = _pool(made)
    pending = begin_on(pool, "a", lambda host: lambda: None, 1.0, frozenset())
    outcomes = list(pending.call_each([{"tool": "read"}], then_report=True))
    world = pending.result()
    assert outcomes == [{"status": "ok"}] and made[0].client.requests == ["call", "report"]
    world.report()
    assert made[0].client.requests == ["call", "report"]  # answered by the one sent ahead
    world.call({"tool": "read"})
    world.report()
    assert made[0].client.requests == ["call", "report", "call", "report"]


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


def test_no_spare_is_started_for_a_key_whose_hosts_are_kept(made):
    pool = _pool(made, warm=True)
    first = pool.take("a")
    assert made == [first]  # its host is kept when its world closes: the next world of "a" reuses it
    pool.give_back("a", first)
    assert pool.take("a") is first and len(made) == 1


def test_a_spare_is_started_once_a_keys_host_was_not_kept(made):
    pool = _pool(made, warm=True)
    first = pool.take("a")
    first.tainted = True
    pool.give_back("a", first)
    second = pool.take("a")
    assert len(made) == 3 and made[-1] is not second and made[-1].key == "a"
    second.tainted = True
    pool.give_back("a", second)
    assert pool.take("a") is made[2]


def test_a_spare_is_never_stopped_unused(made):
    pool = _pool(made, warm=True, idle=2)
    for key in ("a", "b"):  # neither key's host is kept
        host = pool.take(key)
        host.tainted = True
        pool.give_back(key, host)
    pool.take("a")
    spare_a = made[-1]
    pool.take("c")
    assert not spare_a.stopped  # another key's world leaves it be
    pool.take("b")
    assert not spare_a.stopped and pool.idle == 1  # a newer spare (for "b") sends it idle
    assert pool.take("a") is spare_a


def test_prepare_starts_hosts_together_for_the_keys_without_one_within_the_idle_limit(made):
    batches = []

    def start_many(keys):
        batches.append(list(keys))
        hosts = [FakeHost(key) for key in keys]
        made.extend(hosts)
        return hosts

    pool = Pool(lambda key: FakeHost(key), lambda host: setattr(host, "stopped", True), idle=3,
                start_many=start_many)
    used = pool.take("a")
    pool.give_back("a", used)
    pool.prepare(["a", "b", "b", "c", "d", "e"])
    assert batches == [["b", "c"]]  # "a" has its idle host; the limit leaves room for two
    assert pool.take("b") is made[0] and pool.take("c") is made[1] and pool.take("a") is used
    pool.prepare(["b"])  # its host is in use: the world about to open needs another
    assert batches == [["b", "c"], ["b"]] and pool.take("b") is made[-1]


def test_prepare_leaves_out_a_host_that_failed_to_start(made):
    pool = Pool(lambda key: FakeHost(key), lambda host: None, idle=2, start_many=lambda keys: [None, FakeHost("b")])
    pool.prepare(["a", "b"])
    assert pool.idle == 1 and pool.take("b").key == "b"


def test_a_host_whose_server_failed_to_close_its_world_is_not_reused(made):
    pool = _pool(made)
    host = pool.take("a")
    host.client.failing_close = True
    pool.give_back("a", host)
    again = pool.take("a")
    assert again is not host and host.stopped


def test_a_host_started_while_the_pool_is_drained_is_stopped_not_kept(made):
    pool = _pool(made, idle=0, warm=True)
    drained = []

    def warm(key, host):  # the pool is drained from another thread while this spare is warmed
        drained.extend(pool.drain())
        return None

    first = pool.take("a", warm)
    spare = made[-1]
    assert {id(host) for host in drained} == {id(first), id(spare)}  # the drainer stops them
    assert pool._spare is None and not pool.hosts(), "the pool keeps nothing of its own"
    with pytest.raises(EnvError, match="closed"):
        pool.take("a")


def test_a_host_whose_start_outlasts_the_drain_is_stopped_at_once():
    pools: list[Pool] = []
    started: list[FakeHost] = []

    def start(key):
        pools[0].drain()  # another thread drains the pool while this host boots
        started.append(FakeHost(key))
        return started[-1]

    pools.append(Pool(start, lambda host: setattr(host, "stopped", True), idle=2))
    with pytest.raises(EnvError, match="closed"):
        pools[0].take("a")
    assert started[0].stopped and not pools[0].hosts()


def _memory_fits(want, have):
    """As the sandbox's: a world kept in memory ("mem:<mounts>") runs on any host with its mounts."""
    return want.startswith("mem:") and want.split(":", 1)[1] == have.split(":", 1)[1]


def test_a_world_another_keys_host_fits_rides_on_it_and_the_host_goes_back_under_its_own_key(made):
    pool = _pool(made, fits=_memory_fits)
    files = pool.take("files:m")
    pool.give_back("files:m", files)
    assert pool.take("mem:other") is not files and len(made) == 2  # other mounts: a host of its own
    pool.give_back("mem:other", made[1])
    assert pool.take("mem:m") is files and len(made) == 2  # no start: the files host serves it
    pool.give_back("mem:m", files)
    assert pool.take("files:m") is files and len(made) == 2  # kept as a files host, found by its own key
    pool.give_back("files:m", files)
    assert pool.take("files:x") is not files and len(made) == 3  # a host fits only worlds kept in memory


def test_a_host_of_the_worlds_own_key_is_taken_before_one_that_fits(made):
    pool = _pool(made, idle=3, fits=_memory_fits)
    files, memory = pool.take("files:m"), pool.take("mem:m")
    assert memory is not files  # the files host was busy
    pool.give_back("files:m", files)
    pool.give_back("mem:m", memory)
    assert pool.take("mem:m") is memory and pool.take("mem:m") is files


def test_prepare_starts_no_host_for_a_world_another_prepared_or_idle_host_fits(made):
    pool = _pool(made, idle=4, fits=_memory_fits)
    pool.prepare(["mem:m", "files:m", "mem:other"])
    assert sorted(host.key for host in made) == ["files:m", "mem:other"]
    assert pool.take("mem:m").key == "files:m" and len(made) == 2
    both_fit = _pool([], idle=4, fits=lambda want, have: True)  # each fits the other: neither is dropped
    both_fit.prepare(["a", "b"])
    assert both_fit.idle == 2
