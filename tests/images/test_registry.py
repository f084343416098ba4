"""The loopback registry itself: TLS that only its own CA vouches for,
basic auth, and nothing left running after the block."""

import base64
import http.client
import socket
import ssl

import pytest

from . import registry


def get_v2(reg, context, credentials=None) -> int:
    conn = http.client.HTTPSConnection("127.0.0.1", reg.port, context=context, timeout=5)
    headers = {}
    if credentials:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
    try:
        conn.request("GET", "/v2/", headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_tls_auth_and_clean_stop(tmp_path):
    with registry.running(tmp_path / "registry") as reg:
        trusting = ssl.create_default_context(cafile=str(reg.ca_certificate))
        assert get_v2(reg, trusting) == 401
        assert get_v2(reg, trusting, (reg.username, "wrong")) == 401
        assert get_v2(reg, trusting, (reg.username, reg.password)) == 200
        with pytest.raises(ssl.SSLCertVerificationError):
            get_v2(reg, ssl.create_default_context())  # the system store alone does not trust it
        port = reg.port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
