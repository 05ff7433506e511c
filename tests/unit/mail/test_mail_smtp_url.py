from __future__ import annotations

import pytest

from codity.domain.errors import ConfigurationError
from codity.mail import parse_smtp_url


def test_starttls_with_credentials() -> None:
    t = parse_smtp_url("smtp://us%40er:p%3Ass@mail.example:587?starttls=true")
    assert (t.host, t.port, t.starttls, t.implicit_tls) == ("mail.example", 587, True, False)
    assert (t.username, t.password) == ("us@er", "p:ss")
    assert "p:ss" not in repr(t)  # the password never shows up in a repr (or a log)


def test_implicit_tls_defaults_to_465() -> None:
    t = parse_smtp_url("smtps://mail.example")
    assert (t.port, t.implicit_tls, t.starttls) == (465, True, False)


def test_plain_smtp_defaults() -> None:
    t = parse_smtp_url("smtp://127.0.0.1:2525")
    assert (t.host, t.port, t.starttls, t.username) == ("127.0.0.1", 2525, False, None)


@pytest.mark.parametrize("url", ["http://mail.example", "smtp://", "smtp://host:notaport"])
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_smtp_url(url)
