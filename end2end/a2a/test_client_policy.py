"""`ptyhost a2a`, our client, against a2a-sdk's own server offering only 1.0, only 0.3,
both, or a mislabelled 1.0 interface: which version each policy selects, that strict 1.0
never uses 0.3, and that auto falls back only on VersionNotSupported and only when allowed.
And `ptyhost a202` against the same foreign server: the capability check reads its card,
and a server that never echoes the activation has not activated the extension."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "..", "server", "examples", "a2a_sdk_server.py")
BIN = os.environ.get("PTYHOST_BIN", "../../target/debug/ptyhost")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(mode):
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, str(port), mode])
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/.well-known/agent-card.json", timeout=1)
            return proc, base
        except OSError:
            assert time.time() < deadline, "the a2a-sdk server did not start"
            time.sleep(0.1)


def running(mode):
    """The server's base URL while the fixture lasts."""
    proc, base = serve(mode)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module", params=["1.0", "0.3", "both"])
def sdk(request):
    for base in running(request.param):
        yield request.param, base


@pytest.fixture(scope="module")
def mislabelled():
    yield from running("mislabelled")


def client(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIWG_")}
    # A fresh interface cache per call: each case shows the policy, not a remembered refusal.
    env["PTYHOST_A2A_CACHE"] = os.path.join(tempfile.mkdtemp(prefix="ptyhost-cache-"), "interfaces.json")
    done = subprocess.run([BIN, "a2a", "--json", *args], capture_output=True, text=True, env=env, timeout=60)
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.strip()]
    return done.returncode, lines, done.stderr


# mode -> policy -> the version selected, or None when the policy finds nothing to use.
EXPECTED = {
    "1.0": {"0.3": None, "1.0": "1.0", "auto": "1.0"},
    "0.3": {"0.3": "0.3", "1.0": None, "auto": "0.3"},
    "both": {"0.3": "0.3", "1.0": "1.0", "auto": "1.0"},
}


@pytest.mark.parametrize("policy", ["0.3", "1.0", "auto"])
def test_each_policy_selects_the_version_the_card_allows(sdk, policy):
    mode, base = sdk
    code, out, err = client("--a2a-protocol", policy, "status", base)
    expected = EXPECTED[mode][policy]
    if expected is None:
        assert code != 0 and "no interface" in err, err
        return
    assert code == 0, err
    assert out[0]["selectedVersion"] == expected
    code, out, err = client("--a2a-protocol", policy, "send", base, "hello")
    assert code == 0, err
    assert out[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_auto_falls_back_only_on_version_not_supported_and_only_when_allowed(mislabelled):
    base = mislabelled
    code, out, err = client("--a2a-protocol", "auto", "--a2a-protocol-fallback", "status", base)
    assert code == 0, err
    assert (out[0]["selectedVersion"], out[0]["binding"]) == ("0.3", "JSONRPC")
    code, out, err = client("--a2a-protocol", "auto", "--a2a-protocol-fallback", "send", base, "hello")
    assert code == 0 and out[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", err
    code, _, err = client("--a2a-protocol", "auto", "--no-a2a-protocol-fallback", "send", base, "hello")
    assert code != 0 and "VERSION_NOT_SUPPORTED" in err, err
    code, _, err = client("--a2a-protocol", "1.0", "--a2a-protocol-fallback", "send", base, "hello")
    assert code != 0 and "VERSION_NOT_SUPPORTED" in err, "strict 1.0 never selects 0.3: " + err


OFFER = os.path.join(HERE, "..", "..", "server", "tests", "fixtures", "a202", "offer.json")


def a202(*args):
    done = subprocess.run([BIN, "a202", "--json", *args], capture_output=True, text=True, timeout=60)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


@pytest.fixture(scope="module")
def declaring():
    yield from running("a202")


def test_a202_check_reads_the_declaration_on_a_foreign_card(sdk, declaring):
    code, out, err = a202("check", declaring)
    assert code == 0, err
    assert (out["outcome"], out["write_version"]) == ("supported", "0.1")
    _, base = sdk
    code, out, err = a202("check", base)
    assert (code, out["code"]) == (1, "A202-EXTENSION-UNSUPPORTED"), err


def test_a202_absent_activation_echo_is_non_activation(declaring):
    code, out, err = a202("send", declaring, OFFER)
    assert (code, out["code"]) == (1, "A202-EXTENSION-UNSUPPORTED"), err
