"""The one retry policy and the credentials of stacklock.http, tested once: what is
transient, how long to wait (Retry-After, backoff, jitter, the total), and which
request carries which credentials."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
import respx

from stacklock.errors import StacklockError
from stacklock.http import (
    BodyTooLarge,
    Credentials,
    DeadlineExceeded,
    Limits,
    RetriesExhausted,
    Retry,
    get,
    is_network_failure,
    retry_after,
    run_deadline,
    transient,
)

REQUEST = httpx.Request("GET", "https://pypi.org/simple/x/")


@pytest.mark.parametrize(("outcome", "expected"), [
    (httpx.Response(200), None),
    (httpx.Response(404), None),
    (httpx.Response(401), None),
    (httpx.Response(429), "HTTP 429"),
    (httpx.Response(408), "HTTP 408"),
    (httpx.Response(500), "HTTP 500"),
    (httpx.Response(503), "HTTP 503"),
    (httpx.ConnectError("refused"), "ConnectError: refused"),
    (httpx.ReadError("reset by peer"), "ReadError: reset by peer"),
    (httpx.RemoteProtocolError("closed early"), "RemoteProtocolError: closed early"),
    (httpx.ReadTimeout("slow"), "timed out (ReadTimeout)"),
    (httpx.ConnectTimeout("slow"), "timed out (ConnectTimeout)"),
    (httpx.DecodingError("bad gzip"), "DecodingError: bad gzip"),
    (DeadlineExceeded("drip"), None),
    (BodyTooLarge("bomb"), None),
    (httpx.UnsupportedProtocol("ftp"), None),
    (httpx.TooManyRedirects("loop"), None),
    (ValueError("a bug"), None),
], ids=lambda v: type(v).__name__ if not isinstance(v, httpx.Response)
    else str(v.status_code))
def test_the_classifier(outcome: object, expected: str | None) -> None:
    assert transient(outcome) == expected  # type: ignore[arg-type]


def test_a_status_error_is_classified_by_its_answer() -> None:
    answer = httpx.Response(503, request=REQUEST)
    error = httpx.HTTPStatusError("503", request=REQUEST, response=answer)
    assert transient(error) == "HTTP 503"


def test_retry_after_in_seconds_and_as_a_date() -> None:
    assert retry_after(httpx.Response(429, headers={"retry-after": "7"})) == 7.0
    when = datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC)
    answer = httpx.Response(503, headers={"retry-after": format_datetime(when,
                                                                          usegmt=True)})
    assert retry_after(answer, now=when.timestamp() - 30) == 30.0
    assert retry_after(httpx.Response(503, headers={"retry-after": "soon"})) is None
    assert retry_after(httpx.Response(503)) is None


def test_backoff_doubles_is_capped_and_jittered() -> None:
    plain = Retry(backoff=0.5, max_delay=3.0, jitter=0.25, random=lambda: 0.5)
    assert [plain.delay(n) for n in (2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    low = Retry(backoff=1.0, jitter=0.25, random=lambda: 0.0)
    high = Retry(backoff=1.0, jitter=0.25, random=lambda: 1.0)
    assert (low.delay(2), high.delay(2)) == (0.75, 1.25)
    asked = Retry(backoff=0.5, max_retry_after=20.0, random=lambda: 0.5)
    assert asked.delay(2, 7.0) == 7.0 and asked.delay(2, 600.0) == 20.0


def _answers(*outcomes: object) -> tuple[list[int], object]:
    calls: list[int] = []

    def attempt(n: int) -> object:
        calls.append(n)
        outcome = outcomes[n - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return calls, attempt


def test_a_429_is_retried_after_what_the_server_asks() -> None:
    slept: list[float] = []
    calls, attempt = _answers(httpx.Response(429, headers={"retry-after": "2"}),
                              httpx.Response(200))
    policy = Retry(sleep=slept.append, random=lambda: 0.5)
    assert policy.call(attempt).status_code == 200  # type: ignore[arg-type]
    assert calls == [1, 2] and slept == [2.0]


def test_what_is_not_transient_is_raised_or_returned_at_once() -> None:
    slept: list[float] = []
    policy = Retry(sleep=slept.append)
    calls, attempt = _answers(httpx.Response(404))
    assert policy.call(attempt).status_code == 404  # type: ignore[arg-type]
    calls, attempt = _answers(DeadlineExceeded("drip"))
    with pytest.raises(DeadlineExceeded):
        policy.call(attempt)  # type: ignore[arg-type]
    assert calls == [1] and slept == []


def test_the_last_transient_outcome_says_how_many_attempts() -> None:
    calls, attempt = _answers(httpx.ReadError("reset"), httpx.Response(503),
                              httpx.Response(503))
    with pytest.raises(RetriesExhausted) as info:
        Retry(sleep=lambda s: None).call(attempt)  # type: ignore[arg-type]
    assert (info.value.attempts, info.value.problem) == (3, "HTTP 503")
    assert info.value.response is not None and calls == [1, 2, 3]


def test_the_total_stops_before_a_wait_that_would_pass_it() -> None:
    now = [0.0]
    policy = Retry(attempts=10, backoff=4.0, total=5.0, random=lambda: 0.5,
                   clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    calls, attempt = _answers(*[httpx.Response(503)] * 10)
    with pytest.raises(RetriesExhausted, match="gave up within the 5 s allowed"):
        policy.call(attempt)  # type: ignore[arg-type]
    assert calls == [1, 2]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_credentials_go_to_the_index_origin_only(tmp_path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine files.example login nina password n3trc\n")
    creds = Credentials([("corp", "https://alice:s3cret@pkgs.example/simple"),
                         ("team", "https://team.example:8443/simple")],
                        netrc_file=netrc,
                        environ={"STACKLOCK_INDEX_TEAM_USERNAME": "bob",
                                 "STACKLOCK_INDEX_TEAM_PASSWORD": "env-pw"})
    url = httpx.URL
    assert creds.lookup(url("https://pkgs.example/packages/x.whl")) == (
        "alice", "s3cret")
    assert creds.lookup(url("https://pkgs.example:443/simple/y/")) == (
        "alice", "s3cret")
    assert creds.lookup(url("http://pkgs.example/simple/")) is None  # other scheme
    assert creds.lookup(url("https://team.example:8443/a")) == ("bob", "env-pw")
    assert creds.lookup(url("https://team.example/a")) is None  # other port
    assert creds.lookup(url("https://files.example/f.whl")) == ("nina", "n3trc")
    assert creds.lookup(url("https://elsewhere.example/f.whl")) is None
    assert creds.lookup(url("https://carol:pw@elsewhere.example/")) == ("carol", "pw")


def test_an_unreadable_netrc_is_one_line(tmp_path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine\n")
    with pytest.raises(StacklockError, match="unreadable netrc"):
        Credentials(netrc_file=netrc).lookup(httpx.URL("https://a.example/"))


@respx.mock
def test_a_range_read_to_the_index_host_carries_its_credentials() -> None:
    page = respx.get("https://pkgs.example/simple/x/").mock(
        return_value=httpx.Response(200, text="<a href='/f/x-1.whl'>x</a>"))
    wheel = respx.get("https://pkgs.example/f/x-1.whl").mock(
        return_value=httpx.Response(206, content=b"PK"))
    other = respx.get("https://cdn.example/f/x-1.whl").mock(
        return_value=httpx.Response(200, content=b"PK"))
    creds = Credentials([("corp", "https://alice:s3cret@pkgs.example/simple")])
    with httpx.Client(auth=creds) as http:
        get(http, "https://pkgs.example/simple/x/")
        get(http, "https://pkgs.example/f/x-1.whl", headers={"Range": "bytes=-2"})
        get(http, "https://cdn.example/f/x-1.whl")
    assert page.calls.last.request.headers["authorization"] == _basic("alice",
                                                                      "s3cret")
    assert wheel.calls.last.request.headers["authorization"] == _basic("alice",
                                                                       "s3cret")
    assert "authorization" not in other.calls.last.request.headers


def test_limits_from_the_environment() -> None:
    assert Limits.from_env({}) == Limits()
    found = Limits.from_env({"STACKLOCK_MAX_BODY_BYTES": "1024",
                             "STACKLOCK_HTTP_TIMEOUT": "2.5"})
    assert (found.max_bytes, found.deadline) == (1024, 2.5)
    with pytest.raises(StacklockError, match="STACKLOCK_HTTP_TIMEOUT=soon"):
        Limits.from_env({"STACKLOCK_HTTP_TIMEOUT": "soon"})
    # nan and inf are no deadline, a count of 5,000 digits no int(): each one line
    for variable, text in (("STACKLOCK_HTTP_TIMEOUT", "nan"),
                           ("STACKLOCK_HTTP_TIMEOUT", "inf"),
                           ("STACKLOCK_MAX_BODY_BYTES", "9" * 5000)):
        with pytest.raises(StacklockError) as caught:
            Limits.from_env({variable: text})
        assert str(caught.value).startswith(f"{variable}={text[:40]}")
        assert "expected a finite number > 0" in str(caught.value)
        assert len(str(caught.value)) < 300


def test_the_run_deadline_and_timeout_flag_refuse_what_is_no_deadline(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from stacklock.cli import main
    from stacklock.http import make_http_client

    for text in ("nan", "inf", "0", "later"):
        monkeypatch.setenv("STACKLOCK_RUN_TIMEOUT", text)
        with pytest.raises(StacklockError, match=f"STACKLOCK_RUN_TIMEOUT={text}: "):
            make_http_client()
    monkeypatch.delenv("STACKLOCK_RUN_TIMEOUT")
    assert main(["resolve", "pypi-small", "--check", "--timeout", "nan"]) == 2
    assert "--timeout: nan is not a finite number of seconds > 0" in \
        capsys.readouterr().err


def test_a_run_deadline_refuses_requests_after_it() -> None:
    now = [0.0]
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200)

    hook = run_deadline(60.0, clock=lambda: now[0])
    with httpx.Client(transport=httpx.MockTransport(handler),
                      event_hooks={"request": [hook]}) as http:
        get(http, "https://pypi.org/simple/a/")
        now[0] = 61.0
        with pytest.raises(DeadlineExceeded, match="passed its 60 s"):
            get(http, "https://pypi.org/simple/b/")
    assert sent == ["https://pypi.org/simple/a/"]
    assert transient(DeadlineExceeded("x")) is None  # not retried


@pytest.mark.parametrize(("exc", "network"), [
    (httpx.ConnectError("refused", request=REQUEST), True),
    (httpx.ReadTimeout("slow", request=REQUEST), True),
    (httpx.RemoteProtocolError("reset", request=REQUEST), True),
    (DeadlineExceeded("dripped", request=REQUEST), True),
    (RetriesExhausted("HTTP 503", attempts=3), True),
    (httpx.HTTPStatusError("x", request=REQUEST,
                           response=httpx.Response(503, request=REQUEST)), True),
    (httpx.HTTPStatusError("x", request=REQUEST,
                           response=httpx.Response(404, request=REQUEST)), False),
    (BodyTooLarge("big", request=REQUEST), False),
    (httpx.TooManyRedirects("loop", request=REQUEST), False),
    (httpx.UnsupportedProtocol("ftp", request=REQUEST), False),
])
def test_exit_3_is_for_the_network_not_the_request(exc, network):
    """What ``StacklockError(network=...)`` is given: a host that did not
    answer (exit 3), not a request the input got wrong (exit 2)."""
    assert is_network_failure(exc) is network
    assert StacklockError("x", network=network).exit_code == (3 if network else 2)
