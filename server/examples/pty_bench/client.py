"""pty_bench's client that is not Rust: the Python `websockets` client measuring one-byte
echo and a flood to one viewer, through ptyhost's pty-ws (binary or JSON) or through the
bare relay (`pty_relay`), and the same flood read from a raw PTY by Python itself.

    client.py echo URL [TOKEN]                prints: p50_us p99_us
    client.py flood URL [TOKEN SUBPROTOCOL]   prints: bytes seconds
    client.py raw-flood FILE                  prints: bytes seconds
    client.py joins URL TOKEN N               prints: p50_ms slowest_ms (N at once)
    client.py observers URL TOKEN N BYTES     prints: complete rekeyed lagged keyframes flood_seconds

With a TOKEN the URL is a ptyhost attach URL (joined as controller for the echo, as
observer for the flood); without one it is the bare relay."""

import asyncio
import base64
import json
import os
import subprocess
import sys
import time

from websockets.asyncio.client import connect

# ROUNDS in the environment makes a longer loop, to profile a server under it. Beyond about
# 4,000 round trips, start that server with a higher --rate-limit-frames: a token's default
# budget (2,000 frames a second, 4,000 at once) would stall the loop.
ROUNDS = int(os.environ.get("ROUNDS", "500"))


def envelope(op, payload):
    return json.dumps({"op": op, "id": str(time.monotonic_ns()), "ts": "2026-12-03T00:00:00Z", "payload": payload})


async def attach(url, token, subprotocol, role):
    bearer = "bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    ws = await connect(url, subprotocols=[subprotocol, bearer], max_size=None, compression=None)
    await ws.recv()  # binding_hello
    await ws.send(envelope("pty.join_session", {"role": role}))
    joined = None
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            continue
        f = json.loads(frame)
        kind = f.get("payload", {}).get("kind")
        if kind == "RoleAssigned":
            joined = f.get("sequence", 0)
        elif kind == "Keyframe" and joined is not None and f.get("sequence", 0) > joined:
            return ws


def output_of(frame):
    """The PTY bytes a frame carries (PW1O, a JSON Output, or the relay's raw bytes), or
    None for a Closed frame, or b"" for anything else."""
    if isinstance(frame, bytes):
        return frame[13:] if frame[:4] == b"PW1O" else frame
    f = json.loads(frame)
    kind = f.get("payload", {}).get("kind")
    if kind == "Output":
        return base64.b64decode(f["payload"]["data"])
    return None if kind == "Closed" else b""


async def echo(url, token):
    if token:
        ws = await attach(url, token, "pty-ws.v1.binary", "controller")
    else:
        ws = await connect(url, max_size=None, compression=None)
    await asyncio.sleep(0.3)
    times = []
    for i in range(ROUNDS):
        byte = bytes([ord("a") + i % 26])
        t = time.perf_counter()
        await ws.send(b"PW1I" + byte if token else byte)
        while byte not in (output_of(await ws.recv()) or b""):
            pass
        times.append(time.perf_counter() - t)
    await ws.close()
    times.sort()
    print(f"{times[len(times) // 2] * 1e6:.0f} {times[len(times) * 99 // 100] * 1e6:.0f}")


async def flood(url, token, subprotocol):
    if token:
        ws = await attach(url, token, subprotocol, "observer")
    else:
        ws = await connect(url, max_size=None, compression=None)
    total, first, last = 0, None, None
    async for frame in ws:
        data = output_of(frame)
        if data is None:
            break
        if data:
            last = time.perf_counter()
            first = first or last
            total += len(data)
    print(f"{total} {(last - first) if first else 0:.6f}")


async def timed_join(url, token):
    t = time.perf_counter()
    ws = await attach(url, token, "pty-ws.v1", "observer")
    took = time.perf_counter() - t
    await ws.close()
    return took


async def joins(url, token, n):
    times = sorted(await asyncio.gather(*(timed_join(url, token) for _ in range(n))))
    print(f"{times[len(times) // 2] * 1e3:.1f} {times[-1] * 1e3:.1f}")


async def observer(ws, expect):
    """One binary observer of a flood, to its Closed: whether it got every byte, and how
    often it was told it lagged and sent a keyframe."""
    total = lagged = keyframes = 0
    first = last = None
    async for frame in ws:
        if isinstance(frame, bytes):
            total += len(frame) - 13
            last = time.perf_counter()
            first = first or last
            continue
        f = json.loads(frame)
        payload = f.get("payload", {})
        if payload.get("code") == "PTY_OUTPUT_LAGGED":
            lagged += 1
        elif payload.get("kind") == "Keyframe":
            keyframes += 1
        elif payload.get("kind") == "Closed":
            break
    await ws.close()
    return total == expect, lagged, keyframes, first, last


async def observers(url, token, n, expect):
    # Joined one after another (a burst of upgrades from one address is admitted only so
    # far), then read all at once.
    joined = [await attach(url, token, "pty-ws.v1.binary", "observer") for _ in range(n)]
    results = await asyncio.gather(*(observer(ws, expect) for ws in joined))
    spans = [r for r in results if r[3] is not None]
    took = max(r[4] for r in spans) - min(r[3] for r in spans) if spans else 0
    complete = sum(1 for r in results if r[0])
    rekeyed = sum(1 for r in results if r[1])
    print(f"{complete} {rekeyed} {sum(r[1] for r in results)} {sum(r[2] for r in results)} {took:.3f}")


def raw_flood(path):
    main, child = os.openpty()
    proc = subprocess.Popen(["cat", path], stdin=child, stdout=child, stderr=child)
    os.close(child)
    total, first, last = 0, None, None
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        last = time.perf_counter()
        first = first or last
        total += len(data)
    proc.wait()
    print(f"{total} {last - first:.6f}")


def main():
    mode, target, *rest = sys.argv[1:]
    if mode == "echo":
        asyncio.run(echo(target, rest[0] if rest else None))
    elif mode == "flood":
        token, subprotocol = rest if rest else (None, None)
        asyncio.run(flood(target, token, subprotocol))
    elif mode == "joins":
        asyncio.run(joins(target, rest[0], int(rest[1])))
    elif mode == "observers":
        asyncio.run(observers(target, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "raw-flood":
        raw_flood(target)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
