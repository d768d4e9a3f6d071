#!/usr/bin/env python3
"""parla-serve against hostile clients (issue 36), on loopback only, every loop bounded in time and size.

Starts parla-serve (--port 0), then runs each attack while a probe opens a fresh connection every
--probe-interval seconds and asks GET /health and POST /translate (one short sentence). For each attack it checks
that the server lives, that every probe was answered, that /health was answered within --probe-ms (100 by
default; with --quick, as in CTest, one probe per attack may take up to ten times that, a scheduling hiccup on 2
cores shared with other tests: --probe-misses), that the attack itself got the answer it should, and that the
resident memory stayed within --rss-mb of what it was before the attack (long-word, valid work at the limits:
--rss-mb-long-word) and came back to within a quarter of that afterwards (VmRSS from /proc). It prints when the
slowest probe started, counted from the attack's start. The probe runs in a process of its own. The server runs
under RLIMIT_AS --server-memory-gb, so that an old server's bombs fail inside it rather than take the machine
down. A last step sends SIGTERM while slow connections are open and checks exit 0 within the drain timeout plus
one second.

    python3 bench/hostile_serve.py --bin build/bin/parla-serve \
        -m ../shared/models/multi30k-en-de-small/average.pt -c ../shared/models/multi30k-en-de-small/config.json \
        [--attacks deep-json,slowloris,...] [--connections 10000] [--seconds 20] [--expect new|old]

--expect old describes today's failures instead of asserting (run against an old binary to reproduce them).
Exit status: 0 when every check held, 1 when one failed (each failure is printed), 2 for a usage error.
The fast subset runs in CTest (tests/serve/test_serve_hostile_clients.cpp, --quick); the long run's figures are in
docs/BENCHMARKS.md.
"""
import argparse
import collections
import gzip
import json
import multiprocessing
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8  # tcp_info.tcpi_state (linux/tcp.h)
ATTACKS = ["deep-json", "slowloris", "close-storm", "idle", "long-word", "gzip-bomb", "chunked-bomb", "many-headers",
           "long-header", "pipeline", "half-close", "slow-reader", "mid-body-disconnect", "sigterm",
           # issue 59
           "header-fields", "header-trickle", "busy-cap", "address-flood", "address-limit",
           "pipeline-no-read", "second-sigterm", "starve"]


def log(*a):
    print(*a, flush=True)


class Server:
    def __init__(self, args):
        self.args = args
        self.log_file = tempfile.NamedTemporaryFile(prefix="hostile-serve-", suffix=".err", delete=False)
        cmd = [args.bin, "--port", "0", "-m", args.model, "--drain-timeout", str(args.drain)]
        if args.config:
            cmd += ["-c", args.config]
        if args.header_timeout is not None:
            cmd += ["--header-timeout", str(args.header_timeout)]
        cmd += args.server_args
        limit = args.server_memory_gb << 30

        def limits():  # the old server's bombs must fail inside it, not take the machine down
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log_file, stdin=subprocess.DEVNULL,
                                     preexec_fn=limits)
        self.port = 0
        end = time.monotonic() + 120
        while time.monotonic() < end:
            text = self.text()
            m = re.search(r"listening on http://[0-9.]+:([0-9]+)", text)
            if m and "ready:" in text:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit("parla-serve did not start:\n" + self.text())

    def text(self):
        with open(self.log_file.name, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def status_kb(self, key):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def rss_mb(self):
        return self.status_kb("VmRSS") / 1024

    def exit_description(self):
        rc = self.proc.poll()
        if rc is None:
            return "running"
        return f"exit {rc}" if rc >= 0 else f"killed by signal {-rc}"

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        os.unlink(self.log_file.name)


def connect(port, timeout=2.0, source=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=source)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_responses(sock, count=None, deadline=2.0):
    """Reads HTTP/1.1 responses until `count` final ones (1xx skipped) or the connection closes, within
    `deadline` seconds. Returns [(status, headers, body)]."""
    end = time.monotonic() + deadline
    data = b""
    out = []
    closed = False
    while True:
        while True:  # parse what is there
            head_end = data.find(b"\r\n\r\n")
            if head_end < 0:
                break
            head = data[:head_end].decode("latin-1").split("\r\n")
            m = re.match(r"HTTP/1\.[01] (\d{3})", head[0])
            if not m:
                raise ValueError("not an HTTP response: " + head[0][:80])
            status = int(m.group(1))
            headers = {}
            for h in head[1:]:
                k, _, v = h.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0")) if status >= 200 else 0
            if len(data) < head_end + 4 + length:
                break
            body = data[head_end + 4:head_end + 4 + length]
            data = data[head_end + 4 + length:]
            if status >= 200:
                out.append((status, headers, body))
            if count is not None and len(out) >= count:
                return out
        if closed:
            return out
        left = end - time.monotonic()
        if left <= 0:
            return out
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionError, OSError):
            return out
        if not chunk:
            closed = True
        data += chunk


def request(port, method, path, body=b"", headers=(), timeout=2.0):
    """One request on a fresh connection; (status or None, body, seconds)."""
    t0 = time.monotonic()
    try:
        s = connect(port, timeout)
    except OSError:
        return None, b"", time.monotonic() - t0
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for h in headers:
            head += h + "\r\n"
        if body or method == "POST":
            head += f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n"
        s.sendall(head.encode() + b"\r\n" + body)
        r = read_responses(s, 1, timeout - (time.monotonic() - t0))
    except OSError:
        r = []
    finally:
        s.close()
    if not r:
        return None, b"", time.monotonic() - t0
    return r[0][0], r[0][2], time.monotonic() - t0


class Probe:
    """A fresh client every `interval` seconds: GET /health, then POST /translate; latencies in seconds (None: no
    answer within 2 s). Also samples the server's RSS. It runs in a process of its own, so that the attacker's
    work in this one (compressing a bomb, filling sockets) does not delay it and count as the server's."""

    def __init__(self, server, interval):
        self.server, self.interval = server, interval
        self.health, self.translate, self.rss, self.when = [], [], [], []
        self.stopping = multiprocessing.Event()
        self.results = multiprocessing.Queue()
        self.process = multiprocessing.Process(target=self.run, daemon=True)

    def start(self):
        self.process.start()

    def run(self):
        health, translate, rss, when = [], [], [], []
        start = time.monotonic()
        while not self.stopping.is_set():
            when.append(time.monotonic() - start)
            status, body, t = request(self.server.port, "GET", "/health")
            # 503 "degraded" (serve.health_max_queued_s) is /health doing its job under valid load: answered.
            health.append(t if status == 200 or (status == 503 and b"degraded" in (body or b"")) else None)
            status, _, t = request(self.server.port, "POST", "/translate", b'{"text": "A dog runs."}')
            translate.append(t if status == 200 else None)
            rss.append(self.server.rss_mb())
            self.stopping.wait(self.interval)
        self.results.put((health, translate, rss, when))

    def stop(self):
        self.stopping.set()
        self.health, self.translate, self.rss, self.when = self.results.get(timeout=30)
        self.process.join()


def summary(values, when=None):
    """Answered count, p50 and max latency; with `when` (each probe's start, seconds after the attack's), when the
    slowest started."""
    ok = [v for v in values if v is not None]
    if not ok:
        return f"0/{len(values)} answered"
    slowest = max(ok)
    at = f" at +{when[values.index(slowest)]:.1f} s" if when else ""
    return (f"{len(ok)}/{len(values)} answered, p50 {1e3 * statistics.median(ok):.1f} ms, "
            f"max {1e3 * slowest:.1f} ms{at}")


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- attacks: each returns (what happened, [failures]) and runs at most about args.seconds -------------------------

def attack_deep_json(server, args):
    depth = 100000
    body = b'{"text": "A dog.", "beam_size": ' + b"[" * depth + b"]" * depth + b"}"
    status, answer, _ = request(server.port, "POST", "/translate", body, timeout=30)
    what = f"{depth}-deep array ({len(body) // 1000} KB): status {status}, answer {len(answer)} bytes"
    fails = [] if status == 400 and len(answer) < 1000 else ["expected a short 400 answer"]
    return what, fails


def attacker_source(i):
    """The i-th attacking connection's address: 500 per address from 127.0.1.1 on, so that a many-connection attack
    is a distributed one, under serve.max_connections_per_address (the probe comes from 127.0.0.1)."""
    return (f"127.0.1.{1 + i // 500 % 250}", 0)


def open_connections(port, n, deadline):
    socks, failed = [], 0
    end = time.monotonic() + deadline
    while len(socks) + failed < n and time.monotonic() < end:
        try:
            socks.append(connect(port, 1.0, attacker_source(len(socks) + failed)))
        except OSError:
            failed += 1
    return socks, failed


def closed_by_server(s):
    """True when the server has closed `s` (end of stream or reset) or answered on it."""
    s.setblocking(False)  # else Python waits up to the socket's timeout for a byte
    try:
        return s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) is not None
    except BlockingIOError:
        return False
    except OSError:
        return True


def slowloris(server, args, n, hold_seconds, interval=3.0, payload=b"GET /health HTTP/1.1\r\nX-Slow: "):
    """n connections, each sending one header byte every `interval` seconds (a header that never ends); those the
    server closes are reopened. Returns (sockets still open, connect failures, closed by the server)."""
    socks, failed = open_connections(server.port, n, 30)
    sent = [0] * len(socks)
    reopened = 0
    end = time.monotonic() + hold_seconds
    while True:
        for i, s in enumerate(socks):
            byte = payload[sent[i]:sent[i] + 1] or b"a"
            try:
                if closed_by_server(s):
                    raise ConnectionResetError
                s.setblocking(False)
                s.send(byte)
                sent[i] += 1
            except OSError:
                s.close()
                reopened += 1
                try:
                    socks[i] = connect(server.port, 0.5, attacker_source(i))
                    sent[i] = 0
                except OSError:
                    socks[i] = socket.socket()
        if time.monotonic() >= end:
            break
        time.sleep(min(interval, max(0, end - time.monotonic())))
    reopened += sum(closed_by_server(s) for s in socks)
    return socks, failed, reopened


def attack_slowloris(server, args):
    socks, failed, reopened = slowloris(server, args, args.connections, args.seconds)
    for s in socks:
        s.close()
    return (f"{args.connections} connections ({failed} could not connect) sending one header byte every 3 s for "
            f"{args.seconds} s; {reopened} closed by the server and reopened"), []


def attack_close_storm(server, args):
    """Thousands of slow connections closed at once, then a fresh client: the server's event loop has a close to
    handle for each, and the newcomer must not wait behind them (the probe process samples too coarsely to land
    in that window, so this attack times its own /health right after the closes)."""
    rounds = 2 if args.quick else 5
    n = args.storm_connections
    took, failed_total = [], 0
    for _ in range(rounds):
        socks, failed = open_connections(server.port, n, 30)
        failed_total += failed
        for s in socks:
            try:
                s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
            except OSError:
                pass
        time.sleep(1.0)  # every connection accepted and waiting for the rest of its header
        for s in socks:
            s.close()
        status, _, t = request(server.port, "GET", "/health")
        took.append(t if status == 200 else None)
        time.sleep(1.0)
    fails = []
    ok = [t for t in took if t is not None]
    if len(ok) < len(took):
        fails.append(f"{len(took) - len(ok)} of {len(took)} /health requests right after the closes unanswered")
    slow = sorted(t for t in ok if t * 1e3 > args.probe_ms)
    if len(slow) > args.probe_misses or (slow and slow[-1] * 1e3 > 10 * args.probe_ms):
        fails.append(f"{len(slow)} /health requests right after the closes took over {args.probe_ms:.0f} ms")
    times = ", ".join(f"{1e3 * t:.1f}" if t is not None else "none" for t in took)
    return (f"{rounds} rounds of {n} slow connections ({failed_total} could not connect) closed at once; a fresh "
            f"/health right after each: {times} ms"), fails


def attack_idle(server, args):
    socks, failed = open_connections(server.port, args.connections, 30)
    time.sleep(args.seconds)
    for s in socks:
        s.close()
    return f"{len(socks)} silent connections ({failed} could not connect) held {args.seconds} s", []


def concurrently(n, fn):
    results = [None] * n
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, fn(i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def attack_long_word(server, args):
    size = args.max_request_bytes - 64
    body = b'{"text": "' + b"a" * size + b'"}'
    statuses = concurrently(16, lambda i: request(server.port, "POST", "/translate", body, timeout=120)[0])
    what = f"16 concurrent requests of one {size // 1024} KiB word: statuses {sorted(set(map(str, statuses)))}"
    return what, [] if all(s == 200 for s in statuses) else ["every request should be answered 200"]


BOMBS = {}  # inflated size -> gzip body, made before the attack's clock and probe start


def make_bomb(inflated):
    if inflated not in BOMBS:
        BOMBS[inflated] = gzip.compress(b'{"text": "' + b"a" * inflated + b'"}', 9)
    return BOMBS[inflated]


def gzip_bomb(server, inflated):
    body = make_bomb(inflated)
    status, _, _ = request(server.port, "POST", "/translate", body, ["Content-Encoding: gzip"], timeout=60)
    return len(body), status


def bomb_sizes(args):
    return (50 << 20,) if args.quick else (50 << 20, 400 << 20)


def attack_gzip_bomb(server, args):
    rows, fails = [], []
    for inflated in bomb_sizes(args):
        size, status = gzip_bomb(server, inflated)
        rows.append(f"{size // 1000} KB inflating to {inflated >> 20} MB: status {status}")
        if status not in (413, 415):
            fails.append("a compressed body must be refused (413 or 415)")
        if not server.alive():
            break
    return "; ".join(rows), fails


def attack_chunked_bomb(server, args):
    total = 0
    status = None
    limit = 100 << 20
    try:
        s = connect(server.port, 2)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/json\r\n\r\n")
        chunk = b"a" * 65536
        frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        end = time.monotonic() + args.seconds
        s.sendall(b'5\r\n{"te:\r\n')  # not even JSON: the server must stop reading at the byte limit anyway
        while total < limit and time.monotonic() < end:
            s.sendall(frame)
            total += len(chunk)
    except OSError:
        pass
    try:
        r = read_responses(s, 1, 5)
        status = r[0][0] if r else None
    except (OSError, ValueError):
        pass
    s.close()
    what = f"chunked body, {total >> 20} MB sent before the server stopped reading: status {status}"
    return what, [] if status == 413 else ["a chunked body over the limit must be answered 413"]


def attack_many_headers(server, args):
    n = 2100000
    status, sent = None, 0
    try:
        s = connect(server.port, 2)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        block = b"a:b\r\n" * 10000
        end = time.monotonic() + args.seconds
        while sent < n and time.monotonic() < end:
            s.sendall(block)
            sent += 10000
        s.sendall(b"\r\n")
    except OSError:
        pass
    try:
        r = read_responses(s, 1, 5)
        status = r[0][0] if r else None
    except (OSError, ValueError):
        pass
    s.close()
    what = f"{sent} short header lines sent before the server stopped reading: status {status}"
    return what, [] if status == 431 else ["too many headers must be answered 431"]


def attack_long_header(server, args):
    status, _, _ = request(server.port, "GET", "/health", headers=["X-Long: " + "a" * (1 << 20)], timeout=10)
    return f"one 1 MiB header line: status {status}", [] if status == 431 else ["expected 431"]


def attack_pipeline(server, args):
    rows, fails = [], []
    for k in (2, 3, 10):
        paths = ["/health", "/nowhere", "/metrics"] * 4
        paths = paths[:k]
        raw = b""
        for i, p in enumerate(paths):
            last = "Connection: close\r\n" if i == k - 1 else ""
            raw += f"GET {p} HTTP/1.1\r\nHost: x\r\n{last}\r\n".encode()
        s = connect(server.port)
        s.sendall(raw)
        statuses = [r[0] for r in read_responses(s, k, 5)]
        s.close()
        expected = [404 if p == "/nowhere" else 200 for p in paths]
        rows.append(f"{k} GETs in one write: {len(statuses)} answers")
        if statuses != expected:
            fails.append(f"{k} pipelined GETs: statuses {statuses}, expected {expected} in order")
    return "; ".join(rows), fails


def attack_half_close(server, args):
    body = b'{"text": "Two dogs play in the snow."}'
    s = connect(server.port)
    s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    s.shutdown(socket.SHUT_WR)
    r = read_responses(s, 1, 10)
    s.close()
    status = r[0][0] if r else None
    ok = status == 200 and b"translation" in r[0][2]
    return f"request sent, then shutdown(SHUT_WR): status {status}", [] if ok else ["expected the translation"]


def attack_slow_reader(server, args):
    """Asks for more than the socket buffers hold (2,000 pipelined GET /metrics, a few KB each) and reads the
    answers one byte a second: the server's write must time out (serve.write_timeout_s), not wait forever."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(("127.0.0.1", server.port))
    s.setblocking(False)
    pipeline = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
    got, closed, sent = 0, False, 0
    hold = max(args.seconds, 4)  # long enough to see a write timeout of a second or two
    end = time.monotonic() + hold
    while time.monotonic() < end and not closed:
        if sent < len(pipeline):
            try:
                sent += s.send(pipeline[sent:sent + 65536])
            except BlockingIOError:
                pass
            except OSError:
                closed = True
        try:
            got += len(s.recv(1))
        except BlockingIOError:
            pass
        except OSError:
            closed = True
        # Bytes already received are still read after the server's reset: the socket's state tells.
        closed = closed or s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] in (TCP_CLOSE, TCP_CLOSE_WAIT)
        time.sleep(1)
    s.close()
    return (f"asks for 2,000 answers, reads one byte a second: {got} bytes read in {hold} s" +
            (", then the server closed it" if closed else "")), []


def attack_mid_body_disconnect(server, args):
    n = min(args.connections, 200)
    half = b"a" * (args.max_request_bytes // 2)
    for _ in range(n):
        try:
            s = connect(server.port, 1)
            s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"text\": \""
                      % args.max_request_bytes + half)
            s.close()
        except OSError:
            pass
    return f"{n} clients sent half of a {args.max_request_bytes // 1024} KiB body and closed", []

# --- issue 59 -------------------------------------------------------------------------------------------------------

def attack_header_fields(server, args):
    """Header lines `a:\r\n` written in one go (issue 59: 240 MB answered 200 after 24.6 s with RSS 83 MB -> 3.8 GB;
    16 connections x 16 MB took 4 GB): each connection must get 431 while memory stays flat."""
    sizes = [2] * 4 if args.quick else [240] + [16] * 16
    block = b"a:\r\n" * (1 << 18)  # 1 MB

    def one(i):
        status, sent = None, 0
        try:
            s = connect(server.port, 5, attacker_source(i))
        except OSError:
            return None, 0
        try:  # in one write, as the issue did: 4-byte fields then never straddle two of the server's reads
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + block * sizes[i] + b"\r\n")
            sent = sizes[i]
        except OSError:
            pass
        try:
            r = read_responses(s, 1, 30)
            status = r[0][0] if r else None
        except (OSError, ValueError):
            pass
        s.close()
        return status, sent

    results = concurrently(len(sizes), one)
    statuses = [r[0] for r in results]
    what = (f"{len(sizes)} connections writing `a:\\r\\n` x {sizes[0]} MB{' (one 240 MB)' if not args.quick else ''}: "
            f"statuses {sorted(set(map(str, statuses)))}, {sum(r[1] for r in results)} MB written whole (the others "
            f"were cut off by the server)")
    return what, [] if all(st == 431 for st in statuses) else ["every connection should get 431"]


def attack_header_trickle(server, args):
    """A header whose bytes keep coming, a byte every 20 ms within every size limit: serve.header_timeout_s
    (--header-timeout) must cut it however active it is."""
    timeout = args.header_timeout if args.header_timeout is not None else 10
    s = connect(server.port, 2, attacker_source(0))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Trickle: ")
    t0 = time.monotonic()
    closed, sent = False, 0
    while time.monotonic() - t0 < timeout + 5:
        try:
            if closed_by_server(s):
                closed = True
                break
            s.send(b"a")
            sent += 1
        except OSError:
            closed = True
            break
        time.sleep(0.02)
    took = time.monotonic() - t0
    s.close()
    what = (f"one header byte every 20 ms: {sent} bytes sent, " +
            (f"closed by the server after {took:.2f} s" if closed else f"still open after {took:.1f} s") +
            f" (serve.header_timeout_s {timeout:g})")
    return what, [] if closed and took <= timeout + 1 else [f"expected the server to close it at {timeout:g} s"]


ONE_TEXT = b'{"text": "A dog runs."}'
POST_ONE = (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(ONE_TEXT) + ONE_TEXT)


def attack_busy_cap(server, args):
    """--busy-connections clients each keep one valid request in flight (run the server with serve.max_connections
    below that and a long serve.max_wait_ms, e.g. -- --max-connections 20 --max-wait-ms 3000, so that each request
    waits): a fresh /health and /metrics must still be answered (issue 59: 503 on 12 of 14 /health probes), and a
    fresh /translate told 503 at once."""
    n = args.busy_connections
    end = time.monotonic() + max(args.seconds, 3)
    statuses = []
    lock = threading.Lock()

    def hold(i):
        try:
            s = connect(server.port, 2, attacker_source(i))
            while time.monotonic() < end:
                s.sendall(POST_ONE)
                r = read_responses(s, 1, 10)
                with lock:
                    statuses.append(r[0][0] if r else None)
                if not r or r[0][1].get("connection") == "close":
                    s.close()
                    if r and r[0][1].get("retry-after"):  # a well-behaved client, as in the issue
                        time.sleep(float(r[0][1]["retry-after"]))
                    s = connect(server.port, 2, attacker_source(i))
        except (OSError, ValueError):
            pass

    holders = [threading.Thread(target=hold, args=(i,), daemon=True) for i in range(n)]
    for t in holders:
        t.start()
    time.sleep(1.0)  # every place taken
    health, metrics, translate = [], [], []
    while time.monotonic() < end - 0.5:
        status, _, t = request(server.port, "GET", "/health")
        health.append(t if status == 200 else None)
        status, _, t = request(server.port, "GET", "/metrics")
        metrics.append(t if status == 200 else None)
        status, _, t = request(server.port, "POST", "/translate", b'{"text": "A cat."}')
        translate.append(status)
        time.sleep(0.1)
    for t in holders:
        t.join(timeout=15)
    counts = {str(k): statuses.count(k) for k in sorted(set(statuses), key=str)}
    what = (f"{n} clients keeping a request in flight: their answers {counts}; a fresh /health "
            f"{summary(health)}; /metrics {summary(metrics)}; /translate statuses "
            f"{sorted(set(map(str, translate)))}")
    fails = []
    if 503 not in statuses:
        fails.append("the connection places were not all taken (no 503): raise --busy-connections")
    if any(h is None for h in health + metrics):
        fails.append("a fresh /health or /metrics was not answered 200")
    slow = sorted(h for h in health if h is not None and h * 1e3 > args.probe_ms)
    if len(slow) > args.probe_misses:
        fails.append(f"{len(slow)} fresh /health took over {args.probe_ms:.0f} ms")
    return what, fails


def flood(port, sources, seconds, hold, stop_at, rate):
    """Connects from `sources` in turn as fast as it can (at most `rate` a second if > 0), keeping at most `hold`
    open (oldest closed first)."""
    socks = collections.deque()
    i = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        if rate > 0 and i % 100 == 0:
            ahead = start + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        try:
            s = socket.socket()
            s.bind((sources[i % len(sources)], 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            s.close()
        i += 1
        if len(socks) > hold:
            socks.popleft().close()
    stop_at.value = i
    for s in socks:
        s.close()


def attack_address_flood(server, args):
    """Addresses 127.0.0.5-... open connections as fast as they can (issue 59: a 38,500 connections/s flood evicted
    every client that waited 0.5 s between connect and request, and a keep-alive client sending a request a second
    lost 15 of 30 to resets). A keep-alive client on 127.0.0.3 (a request every 0.5 s) and clients on 127.0.0.4
    that wait 0.5 s between connect and request must lose nothing; the flood is held to
    serve.max_connections_per_address and, at serve.max_connections, pushes out its own connections."""
    seconds = max(args.seconds, 3)
    sources = [f"127.0.0.{5 + k}" for k in range(args.flood_addresses)]
    count = multiprocessing.Value("q", 0)
    flooder = multiprocessing.Process(target=flood, args=(server.port, sources, seconds, 20000, count, args.flood_rate), daemon=True)
    flooder.start()
    time.sleep(0.3)
    end = time.monotonic() + seconds - 0.5
    keep_lost, keep_sent, late_lost, late_sent = 0, 0, 0, 0

    def keep_alive():
        nonlocal keep_lost, keep_sent
        s = None
        while time.monotonic() < end:
            try:
                if s is None:
                    s = connect(server.port, 2, ("127.0.0.3", 0))
                keep_sent += 1
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                r = read_responses(s, 1, 2)
                if not r or r[0][0] != 200:
                    raise ConnectionResetError
            except (OSError, ValueError):
                keep_lost += 1
                if s is not None:
                    s.close()
                s = None
            time.sleep(0.5)
        if s is not None:
            s.close()

    def late(i):
        nonlocal late_lost, late_sent
        while time.monotonic() < end:
            late_sent += 1
            try:
                s = connect(server.port, 2, ("127.0.0.4", 0))
                time.sleep(0.5)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                r = read_responses(s, 1, 2)
                s.close()
                if not r or r[0][0] != 200:
                    late_lost += 1
            except (OSError, ValueError):
                late_lost += 1

    threads = [threading.Thread(target=keep_alive)] + [threading.Thread(target=late, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flooder.join(timeout=30)
    _, text, _ = request(server.port, "GET", "/metrics")
    closed = dict(re.findall(r'parla_connections_closed_total\{reason="(\w+)"\} (\d+)', text.decode(errors="replace")))
    what = (f"{len(sources)} addresses opened {count.value} connections in {seconds:g} s "
            f"({count.value / seconds:.0f}/s); keep-alive client lost {keep_lost} of {keep_sent} requests, clients "
            f"waiting 0.5 s before their request lost {late_lost} of {late_sent}; server closed: "
            f"per_address {closed.get('per_address', '0')}, evicted {closed.get('evicted', '0')}")
    fails = []
    if keep_lost or late_lost:
        fails.append("the flood made other addresses' clients lose requests")
    return what, fails


def attack_address_limit(server, args):
    """--address-connections connections from one address (127.0.0.8), each held open without a request: beyond
    serve.max_connections_per_address each must be told 503 at once and closed, naming the key."""
    socks, refused, other = [], 0, 0
    for _ in range(args.address_connections):
        try:
            socks.append(connect(server.port, 2, ("127.0.0.8", 0)))
        except OSError:
            other += 1
    time.sleep(0.3)
    held = 0
    for s in socks:
        if not closed_by_server(s):
            held += 1
            continue
        s.setblocking(True)
        r = read_responses(s, 1, 1)
        if r and r[0][0] == 503 and b"max_connections_per_address" in r[0][2]:
            refused += 1
        else:
            other += 1
    for s in socks:
        s.close()
    what = (f"{args.address_connections} connections from one address: {held} held, {refused} refused with 503 "
            f"naming serve.max_connections_per_address, {other} otherwise")
    return what, [] if refused and not other else ["expected the connections beyond the limit refused with 503"]


def attack_pipeline_no_read(server, args):
    """--connections clients each pipeline 200 GET /metrics and never read an answer (issue 59: 10,000 of them
    delayed a fresh /health to 1,049 ms): what each costs the event loop must be bounded."""
    n = args.connections
    pipeline = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 200
    socks, failed = [], 0
    for i in range(n):
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.bind(attacker_source(i))
            s.settimeout(1)
            s.connect(("127.0.0.1", server.port))
            s.setblocking(False)
            try:
                s.send(pipeline)
            except BlockingIOError:
                pass
            socks.append(s)
        except OSError:
            failed += 1
    time.sleep(args.seconds)
    for s in socks:
        s.close()
    # The server must notice that they are gone (a reset), not keep them until serve.write_timeout_s.
    time.sleep(1.0)
    _, text, _ = request(server.port, "GET", "/metrics")
    m = re.search(rb"^parla_connections (\d+)", text, re.M)
    still = int(m.group(1)) if m else None
    what = (f"{len(socks)} clients ({failed} could not connect) pipelining 200 GET /metrics each, never reading, "
            f"held {args.seconds:g} s; 1 s after they closed, {still} connections open")
    return what, [] if still is not None and still <= 10 else ["the server kept the closed clients' connections"]


def attack_starve(server, args):
    """Issue 59: valid requests that decode to the length cap (64 lines of ", " x 500 at beam 10), many at once,
    then an ordinary one-line request: answered within 2 s, /health degraded (503) while they wait and 200 after.
    Each long request ends in 200, 503 (serve.max_queued_cost) or 504 (serve.request_timeout_s)."""
    n = 10 if args.quick else 100
    body = json.dumps({"texts": [", " * 500] * 64, "beam_size": 10}).encode()
    statuses = [None] * n

    def send(i):
        statuses[i] = request(server.port, "POST", "/translate", body, timeout=600)[0]

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    health_busy = request(server.port, "GET", "/health")[0]
    # Ordinary requests at beam 1, the default beam and beam 10, one after the other while the long ones decode.
    ordinary = []
    for beam in (1, None, 10):
        req = {"text": "A dog runs on the grass."}
        if beam:
            req["beam_size"] = beam
        st, _, took = request(server.port, "POST", "/translate", json.dumps(req).encode(), timeout=120)
        ordinary.append((beam or "default", st, took))
        time.sleep(1.0)
    for t in threads:
        t.join(600)
    time.sleep(1.0)
    health_after = request(server.port, "GET", "/health")[0]
    counts = {str(k): statuses.count(k) for k in sorted(set(statuses), key=str)}
    peak = server.status_kb("VmHWM") / 1024
    what = (f"{n} requests of 64 length-cap lines at beam 10: statuses {counts}; ordinary requests " +
            ", ".join(f"beam {b}: {st} in {t:.2f} s" for b, st, t in ordinary) +
            f"; /health {health_busy} under load, {health_after} after; server peak RSS {peak:.0f} MB")
    fails = []
    if any(st != 200 or t > 2.0 for _, st, t in ordinary):
        fails.append("every ordinary request should be answered 200 within 2 s")
    if any(s not in (200, 503, 504) for s in statuses):
        fails.append("each long request should end in 200, 503 or 504")
    if health_after != 200:
        fails.append("/health should answer 200 once the queue has drained")
    return what, fails


ATTACK_FNS = {
    "deep-json": attack_deep_json, "slowloris": attack_slowloris, "close-storm": attack_close_storm,
    "idle": attack_idle,
    "long-word": attack_long_word, "gzip-bomb": attack_gzip_bomb, "chunked-bomb": attack_chunked_bomb,
    "many-headers": attack_many_headers, "long-header": attack_long_header, "pipeline": attack_pipeline,
    "half-close": attack_half_close, "slow-reader": attack_slow_reader,
    "mid-body-disconnect": attack_mid_body_disconnect,
    "header-fields": attack_header_fields, "header-trickle": attack_header_trickle, "busy-cap": attack_busy_cap,
    "address-flood": attack_address_flood, "address-limit": attack_address_limit,
    "pipeline-no-read": attack_pipeline_no_read,
    "starve": attack_starve,
}


def run_sigterm(server, args):
    """SIGTERM with slow connections open: exit 0 within the drain timeout plus one second."""
    n = min(args.connections, 500)
    holder = threading.Thread(target=lambda: slowloris(server, args, n, args.drain + 4), daemon=True)
    holder.start()
    time.sleep(min(3.0, 1 + n / 2000))
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        rc = server.proc.wait(timeout=args.drain + 30)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    what = f"SIGTERM with {n} slow connections open: " + (
        f"exit {rc} after {took:.2f} s" if rc is not None else f"still running after {took:.0f} s")
    fails = [] if rc == 0 and took <= args.drain + 1 else [f"expected exit 0 within {args.drain + 1} s"]
    return what, fails


def run_second_sigterm(server, args):
    """Requests in flight (held by a long serve.max_wait_ms, as for busy-cap), SIGTERM, then SIGTERM again 0.3 s
    later (issue 59: the second killed the process, status 143, requests unanswered): every request must be
    answered (200 or 503), and the process exit 0 within a second and a half of the second signal."""
    n = 5
    socks = []
    for i in range(n):
        s = connect(server.port, 2, attacker_source(i))
        s.sendall(POST_ONE)
        socks.append(s)
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    statuses = concurrently(n, lambda i: (read_responses(socks[i], 1, 5) or [(None,)])[0][0])
    try:
        rc = server.proc.wait(timeout=args.drain + 30)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    for s in socks:
        s.close()
    what = (f"{n} requests in flight, SIGTERM, SIGTERM again: their statuses {statuses}; " +
            (f"exit {rc} {took:.2f} s after the second" if rc is not None else "still running"))
    fails = []
    if any(st not in (200, 503) for st in statuses):
        fails.append("every request in flight must be answered")
    if rc != 0 or took > 1.5:
        fails.append("expected exit 0 within 1.5 s of the second signal")
    return what, fails


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/bin/parla-serve")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-c", "--config", default="")
    p.add_argument("--attacks", default=",".join(ATTACKS))
    p.add_argument("--connections", type=int, default=10000, help="slow and idle connections (fd limit permitting)")
    p.add_argument("--storm-connections", type=int, default=9000,
                   help="close-storm's connections, closed at once (fd limit permitting; not reduced by --quick)")
    p.add_argument("--seconds", type=float, default=20, help="how long each slow attack lasts")
    p.add_argument("--probe-interval", type=float, default=0.25)
    p.add_argument("--probe-ms", type=float, default=100, help="a fresh /health must be answered within this")
    p.add_argument("--probe-misses", type=int, default=None,
                   help="/health probes per attack allowed over --probe-ms, by at most ten times (1 with --quick, "
                        "else 0)")
    p.add_argument("--rss-mb", type=float, default=512, help="RSS growth allowed during an attack")
    p.add_argument("--rss-mb-long-word", type=float, default=None,
                   help="RSS growth allowed during long-word, which is valid work at the limits: 16 sentences cut to "
                        "256 pieces, decoded together to the output limit (twice --rss-mb by default)")
    p.add_argument("--drain", type=float, default=5, help="the server's --drain-timeout")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="the server's serve.max_request_bytes")
    p.add_argument("--max-sentences", type=int, default=1024)
    p.add_argument("--server-memory-gb", type=int, default=12, help="RLIMIT_AS of the server process")
    p.add_argument("--expect", choices=["new", "old"], default="new",
                   help="old: report what happens without failing (today's server)")
    p.add_argument("--quick", action="store_true",
                   help="CTest's scale: at most 500 connections, 2 s per slow attack, the 50 MB gzip bomb only")
    p.add_argument("--header-timeout", type=float, default=None,
                   help="the server's serve.header_timeout_s (header-trickle waits for it; default: the server's, 10)")
    p.add_argument("--busy-connections", type=int, default=40,
                   help="busy-cap's clients, each keeping a request in flight (above the server's --max-connections)")
    p.add_argument("--flood-addresses", type=int, default=1, help="address-flood's attacking addresses")
    p.add_argument("--flood-rate", type=float, default=0,
                   help="address-flood's connections a second at most (0: as fast as it can)")
    p.add_argument("--address-connections", type=int, default=1100,
                   help="address-limit's connections from one address (above the server's per-address limit)")
    p.add_argument("server_args", nargs="*", help="after --: more parla-serve flags")
    args = p.parse_args()
    if args.quick:
        args.connections = min(args.connections, 500)
        args.seconds = min(args.seconds, 2)
    if args.probe_misses is None:
        args.probe_misses = 1 if args.quick else 0
    fd_limit = raise_fd_limit()
    if args.connections > fd_limit - 64:
        log(f"note: the file-descriptor limit is {fd_limit}: {fd_limit - 64} connections instead of "
            f"{args.connections}")
        args.connections = fd_limit - 64
    args.storm_connections = min(args.storm_connections, fd_limit - 64)
    wanted = args.attacks.split(",")
    unknown = [a for a in wanted if a not in ATTACKS]
    if unknown:
        p.error("unknown attacks: " + ", ".join(unknown))

    if "gzip-bomb" in wanted:
        for inflated in bomb_sizes(args):
            make_bomb(inflated)
    server = Server(args)
    failures = []
    log(f"parla-serve {args.bin} on port {server.port}, pid {server.proc.pid}; {args.connections} connections, "
        f"{args.seconds} s per slow attack; CPU: {cpu_model()}")
    try:
        for name in wanted:
            if not server.alive():
                failures.append(f"{name}: not run, the server is gone ({server.exit_description()})")
                continue
            before = server.rss_mb()
            if name in ("sigterm", "second-sigterm"):
                what, fails = (run_sigterm if name == "sigterm" else run_second_sigterm)(server, args)
                log(f"[{name}] {what}")
                failures += [f"{name}: {f}" for f in fails]
                continue
            probe = Probe(server, args.probe_interval)
            probe.start()
            t0 = time.monotonic()
            try:
                what, fails = ATTACK_FNS[name](server, args)
            except Exception as e:  # noqa: BLE001 - an attack that cannot run is a finding, not a crash of the tool
                what, fails = f"the attack failed: {e!r}", [f"the attack failed: {e!r}"]
            took = time.monotonic() - t0
            time.sleep(max(0.0, 1.0 - took))  # at least a few probes during or right after short attacks
            probe.stop()
            time.sleep(1.5)  # memory given back after the burst
            after = server.rss_mb()
            peak = max([before, after] + probe.rss)
            alive = server.alive()
            log(f"[{name}] {what} ({took:.1f} s)")
            log(f"    server {'alive' if alive else server.exit_description()}; RSS {before:.0f} MB before, "
                f"{peak:.0f} MB peak, {after:.0f} MB after")
            log(f"    fresh /health: {summary(probe.health, probe.when)}; fresh /translate: "
                f"{summary(probe.translate, probe.when)}")
            if not alive:
                fails.append(f"the server died ({server.exit_description()})")
            health_ok = [h for h in probe.health if h is not None]
            if len(health_ok) < len(probe.health):
                fails.append(f"{len(probe.health) - len(health_ok)} of {len(probe.health)} /health probes unanswered")
            # --probe-misses probes of an attack may miss the mark (in CTest, a scheduling hiccup on 2 cores shared
            # with the attacker and other tests), by at most ten times.
            slow = sorted(h for h in health_ok if h * 1e3 > args.probe_ms)
            if len(slow) > args.probe_misses or (slow and slow[-1] * 1e3 > 10 * args.probe_ms):
                fails.append(f"{len(slow)} /health probes took over {args.probe_ms:.0f} ms (slowest "
                             f"{1e3 * slow[-1]:.0f} ms)")
            # Sixteen maximal requests are valid work that queues ahead of the probe (decoding is the bottleneck):
            # there the probe must only be answered eventually, which the next attack's probes show.
            # busy-cap fills every connection place with requests in flight: a /translate probe is told 503 then.
            if name not in ("long-word", "busy-cap") and any(t is None for t in probe.translate):
                fails.append("a /translate probe was not answered")
            # long-word's peak is the decoder's: 16 x 256 pieces x beam 5 with attention caches to the output limit
            # (on the Multi30k model 0.7-0.8 GB with beam 5, 0.2 GB with beam 1); the old server's was tokenizing.
            bound = args.rss_mb
            if name == "long-word":
                bound = args.rss_mb_long_word if args.rss_mb_long_word is not None else 2 * args.rss_mb
            if peak - before > bound:
                fails.append(f"RSS grew by {peak - before:.0f} MB (> {bound:.0f})")
            if alive and after - before > args.rss_mb / 4:
                fails.append(f"RSS stayed {after - before:.0f} MB above its level before the attack")
            failures += [f"{name}: {f}" for f in fails]
    finally:
        server.stop()
    if args.expect == "old":
        log(f"{len(failures)} checks failed (expected against the old server):")
        for f in failures:
            log("  " + f)
        return 0
    if failures:
        log("FAILED:")
        for f in failures:
            log("  " + f)
        return 1
    log("all checks held")
    return 0


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        model = re.search(r"model name\s*:\s*(.*)", text).group(1)
        flags = re.search(r"flags\s*:\s*(.*)", text).group(1).split()
        return f"{model}, {os.cpu_count()} cores, avx512f={'avx512f' in flags}"
    except (OSError, AttributeError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
