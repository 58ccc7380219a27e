"""Requests kept in flight to an env server: the same answers, in the same order, as one request at a
time, errors in their places; a server lost part way fails every later request, and nothing hangs."""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
import subprocess
import sys
import threading

import pytest

from litmus_replay.envs import client as client_module
from litmus_replay.envs.client import EnvClient, MessageTooLarge, ServerError, ServerGone, results

SPEC = {
    "principals": ["alice", "bob"],
    "files": {"tree": {"/workspace/a.txt": "hello"}},
    "records": {"rows": [{"id": 1, "owner": "bob", "data": {"s": 1}}]},
}


def _calls(count: int) -> list[dict]:
    """A mix of small and large requests and replies (more bytes both ways than a pipe holds), and errors."""
    calls = []
    for i in range(count):
        big = "x" * (7000 + i)
        calls += [
            {"tool": "write_file", "params": {"path": f"/workspace/f{i}.txt", "content": big}, "principal": "alice"},
            {"tool": "read_file", "params": {"path": f"/workspace/f{i}.txt"}, "principal": "alice"},
            {"tool": "launch", "params": {}, "principal": "alice"},  # no such tool: an error answer
            {"tool": "update_record", "params": {"id": 1, "fields": {"s": i}}, "principal": "alice"},
        ]
    return calls


@pytest.fixture()
def server(env_server):
    """A started env server and its client; the fixture ends the server with end of input, so it removes
    the world directory it made (a killed one cannot)."""

    def start() -> tuple[subprocess.Popen, EnvClient]:
        proc = env_server()
        return proc, EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)

    return start


def _answers(outcomes) -> list:
    return [("error", type(o).__name__, str(o)) if isinstance(o, Exception) else o for o in outcomes]


def _one_at_a_time(client: EnvClient, requests: list[dict]) -> list:
    answers = []
    for request in requests:
        try:
            answers.append(client.request("call", request=request))
        except (ServerError, MessageTooLarge, ServerGone) as exc:
            answers.append(exc)
    return _answers(answers)


@pytest.mark.parametrize("semantics", ["stub", "real"])
def test_pipelined_answers_equal_one_at_a_time(server, semantics):
    requests = _calls(40)
    answers = []
    for pipelined in (False, True):
        _, client = server()
        client.request("load", spec=SPEC, semantics=semantics)
        if pipelined:
            answers.append(_answers(client.pipeline("call", ({"request": r} for r in requests))))
        else:
            answers.append(_one_at_a_time(client, requests))
        assert client.request("snapshot")["state"]  # still in step afterwards
    assert answers[0] == answers[1]
    assert len(answers[1]) == len(requests)
    assert sum(1 for answer in answers[1] if isinstance(answer, tuple) and "UnknownTool" in answer[2]) == 40


def test_a_request_too_large_is_refused_in_its_place_and_the_rest_go_on(server, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_MESSAGE", 4000)
    _, client = server()
    client.request("load", spec=SPEC, semantics="stub")
    requests = [{"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "alice"},
                {"tool": "write_file", "params": {"path": "/workspace/b", "content": "y" * 5000}, "principal": "alice"},
                {"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "bob"}]
    first, refused, last = client.pipeline("call", ({"request": r} for r in requests))
    assert first["output"] == "hello" and last["output"] == "hello"
    assert isinstance(refused, MessageTooLarge)


def test_requests_sent_at_once_answer_in_their_places_a_refused_one_included(server, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_MESSAGE", 9000)
    requests = _calls(3) + [{"tool": "write_file", "params": {"path": "/workspace/b", "content": "y" * 9000},
                             "principal": "alice"}]
    answers = []
    for at_once in (False, True):
        _, client = server()
        client.request("load", spec=SPEC, semantics="real")
        if at_once:
            sent = client.send_each("call", ({"request": r} for r in requests))
            answers.append(_answers(results(sent)))
        else:
            answers.append(_one_at_a_time(client, requests))
        assert client.request("report") is not None  # still in step afterwards
    assert answers[0] == answers[1] and answers[1][-1][1] == "MessageTooLarge"


@contextmanager
def scripted(script: str):
    """A client on a child that runs ``script`` in place of an env server; the child is killed after."""
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=10)
    finally:
        proc.kill()
        proc.wait()


def test_a_server_lost_part_way_fails_every_later_request():
    # answers two requests, then exits with the rest unread
    script = ("import sys, json\n"
              "for _ in range(2):\n"
              "    m = json.loads(sys.stdin.readline())\n"
              "    sys.stdout.write(json.dumps({'id': m['id'], 'ok': True, 'result': m['op']}) + '\\n'); sys.stdout.flush()\n")
    with scripted(script) as client:
        outcomes = list(client.pipeline("call", ({"request": {"n": i}} for i in range(6))))
    assert outcomes[:2] == ["call", "call"]
    assert all(isinstance(outcome, ServerGone) for outcome in outcomes[2:]) and len(outcomes) == 6
    assert client.broken
    with pytest.raises(ServerGone):
        client.request("snapshot")


def test_replies_that_arrive_together_are_each_held_to_the_limit_not_their_sum(monkeypatch):
    # a server that answers three requests in one write: together over the limit, each under it
    monkeypatch.setattr(client_module, "MAX_MESSAGE", 9000)
    script = ("import sys, json\n"
              "ids = [json.loads(sys.stdin.readline())['id'] for _ in range(3)]\n"
              "sys.stdout.write(''.join(json.dumps({'id': i, 'ok': True, 'result': 'r' * 6000}) + '\\n' for i in ids))\n"
              "sys.stdout.flush()\n"
              "sys.stdin.read()\n")
    with scripted(script) as client:
        replies = [client.send("call", request={"n": i}) for i in range(3)]
        assert [len(reply.result()) for reply in replies] == [6000] * 3
        assert not client.broken


def test_a_reply_over_the_limit_breaks_the_connection(monkeypatch):
    monkeypatch.setattr(client_module, "MAX_MESSAGE", 9000)
    script = ("import sys, json\n"
              "m = json.loads(sys.stdin.readline())\n"
              "sys.stdout.write(json.dumps({'id': m['id'], 'ok': True, 'result': 'r' * 20000}) + '\\n'); sys.stdout.flush()\n"
              "sys.stdin.read()\n")
    with scripted(script) as client:
        with pytest.raises(ServerGone, match="oversized"):
            client.request("call", request={})
        assert client.broken


def test_a_pipe_that_holds_one_page_never_blocks_both_ends(server):
    proc, _ = server()
    fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # what a user over its pipe quota gets
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)
    requests = _calls(10)
    answers: list = []
    worker = threading.Thread(target=lambda: answers.extend(client.pipeline("call", ({"request": r} for r in requests))),
                              daemon=True)
    client.request("load", spec=SPEC, semantics="stub")
    worker.start()
    worker.join(60)
    blocked = worker.is_alive()
    if blocked:
        proc.kill()  # a server blocked on its pipe would never read the end of its input
    assert not blocked, "the client and the server blocked each other"
    assert len(answers) == len(requests)


def test_replies_read_later_are_the_answers_one_at_a_time_gives_in_their_places(server):
    requests = _calls(6)
    answers = []
    for later in (False, True):
        _, client = server()
        client.request("load", spec=SPEC, semantics="real")
        if later:
            replies = [client.send("call", request=r) for r in requests] + [client.send("snapshot")]
            outcomes = []
            for reply in reversed(replies):  # read last first: the earlier ones are kept for their turn
                try:
                    outcomes.append(reply.result())
                except (ServerError, ServerGone) as exc:
                    outcomes.append(exc)
            answers.append(_answers(reversed(outcomes)))
        else:
            answers.append(_one_at_a_time(client, requests) + [client.request("snapshot")])
        assert client.request("report") is not None  # still in step afterwards
    assert answers[0] == answers[1] and len(answers[1]) == len(requests) + 1


def test_requests_sent_ahead_never_block_on_a_pipe_that_holds_one_page(server):
    proc, _ = server()
    fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)
    replies: list = []
    worker = threading.Thread(target=lambda: replies.extend(client.send("call", request=r) for r in _calls(10)),
                              daemon=True)
    client.request("load", spec=SPEC, semantics="stub")
    worker.start()
    worker.join(60)
    blocked = worker.is_alive()
    if blocked:
        proc.kill()  # a server blocked on its pipe would never read the end of its input
    assert not blocked, "the client and the server blocked each other"
    assert [reply.result()["status"] for reply in replies[:2]] == ["ok", "ok"]
    assert len(list(client.pipeline("call", ({"request": r} for r in _calls(1))))) == 4


def test_a_reply_unread_when_the_server_is_lost_fails_as_its_request_would():
    # answers one request, then exits with the rest unread (it makes no world directory)
    script = ("import sys, json\n"
              "m = json.loads(sys.stdin.readline())\n"
              "sys.stdout.write(json.dumps({'id': m['id'], 'ok': True, 'result': m['op']}) + '\\n'); sys.stdout.flush()\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=10)
    try:
        first, second, third = (client.send("close") for _ in range(3))
        with pytest.raises(ServerGone):
            third.result()
        assert first.result() == "close"
        with pytest.raises(ServerGone):
            second.result()
    finally:
        proc.kill()
        proc.wait()


def test_requests_sent_corked_go_in_one_write_and_answer_as_sent_one_by_one(server, monkeypatch):
    requests = _calls(3)
    writes: list[int] = []
    real_write = client_module.os.write
    monkeypatch.setattr(client_module.os, "write", lambda fd, data: writes.append(len(data)) or real_write(fd, data))
    answers = []
    for corked in (False, True):
        _, client = server()
        client.request("load", spec=SPEC, semantics="real")
        writes.clear()
        if corked:
            with client.corked():
                replies = client.send_each("call", ({"request": r} for r in requests[:4]))
                first = replies[0].result()  # waited for inside the block: what was held back goes first
                replies += client.send_each("call", ({"request": r} for r in requests[4:]))
        else:
            replies = [client.send("call", request=r) for r in requests]  # a write each
        answers.append(_answers(results(replies)))
        sent_in = len(writes)
        assert client.request("report") is not None  # still in step afterwards
        if corked:
            assert first == answers[-1][0]
            assert sent_in == 2, "the block's requests went out held back, in two writes (one before the wait)"
        else:
            assert sent_in == len(requests)
    assert answers[0] == answers[1] and len(answers[1]) == len(requests)


def test_a_corked_write_to_a_server_that_is_gone_fails_each_request_in_its_place(server):
    proc, client = server()
    client.request("load", spec=SPEC, semantics="stub")
    proc.kill()
    proc.wait()
    entries = client.send_each("call", ({"request": r} for r in _calls(2)))  # no exception: an entry each
    assert len(entries) == 8 and client.broken
    assert all(isinstance(outcome, ServerGone) for outcome in results(entries))


def test_an_interrupted_corked_block_still_sends_what_it_held_and_raises_what_interrupted_it(server):
    _, client = server()
    client.request("load", spec=SPEC, semantics="stub")
    replies = []
    with pytest.raises(KeyboardInterrupt):
        with client.corked():
            replies += [client.send("call", request=r) for r in _calls(1)]
            raise KeyboardInterrupt
    assert [reply.result()["status"] for reply in replies[:2]] == ["ok", "ok"]
    assert client.request("report") is not None and not client.broken  # in step


def test_a_corked_block_larger_than_a_one_page_pipe_never_blocks_both_ends(server):
    proc, _ = server()
    fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)
    client.request("load", spec=SPEC, semantics="stub")
    replies: list = []

    def send() -> None:
        with client.corked():
            replies.extend(client.send_each("call", ({"request": r} for r in _calls(10))))

    worker = threading.Thread(target=send, daemon=True)
    worker.start()
    worker.join(60)
    blocked = worker.is_alive()
    if blocked:
        proc.kill()
    assert not blocked, "the client and the server blocked each other"
    assert len([reply.result() for reply in replies[:2]]) == 2 and len(replies) == 40
