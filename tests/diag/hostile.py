"""Hostile clients of the watchdog's side channel (run_hang.py hostile): what a stranger on the same
machine can try against a running job. Every rank's listening sockets are found through /proc (as
`ss -ltnp` would); then, against each of them:
  - a connection that stays silent (held open until the job ends);
  - 1 MiB without a newline;
  - a line of invalid UTF-8;
  - well-formed queries without the secret (the old plain format, and the new one with a made-up
    MAC, addressed to the right rank and pid);
  - 1,000 connections opened and closed;
  - (Replayer) queries the watchdog itself sent, captured on the loopback interface (a raw packet
    socket: root), replayed once the hang report is out, each on a new connection.
Every connection is sent the server's challenge at once ("C <32 hex digits>"): nothing else may
come back. libhier's sockets are told from the MPI library's own (Open MPI listens on 0.0.0.0 by
itself) by the addresses each rank logs at HIER_DEBUG=INFO ("side channel on IP:PORT ...").
Findings (`problems`): any byte beyond the challenge sent back to any of these clients, a libhier
socket on 0.0.0.0, on an address it does not advertise or (every rank on this host) on another
address than loopback, a rank with no libhier socket found (nothing tested), no query captured."""
import os
import re
import socket
import struct
import threading
import time

SILENT_S = 0.5  # how long each client waits for an answer that must not come


def _listen_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def listeners_in(table):
    """[(ip, port)] of the IPv4 listening sockets in a /proc/net/tcp table's text."""
    out = []
    for row in table.splitlines()[1:]:
        col = row.split()
        if len(col) > 3 and col[3] == "0A":
            addr, port = col[1].split(":")
            out.append((".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)), int(port, 16)))
    return out


def listeners(pid):
    """[(ip, port)] of the TCP sockets process `pid` listens on (IPv4; IPv6 ones are reported as
    ('v6', port) and count as a problem: the channel must not listen there)."""
    inodes = _listen_inodes(pid)
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            col = row.split()
            if col[3] != "0A" or col[9] not in inodes:  # 0A: LISTEN
                continue
            addr, port = col[1].split(":")
            if v6:
                out.append(("v6", int(port, 16)))
            else:
                ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                out.append((ip, int(port, 16)))
    return out


def _connect(ip, port):
    s = socket.create_connection((ip, port), timeout=2)
    s.settimeout(SILENT_S)
    return s


CHALLENGE = re.compile(rb"C\t[0-9a-f]{32}\n")


def _recv(s, line=False):
    """What comes back on `s`: one line (line: at most 64 bytes, its newline included), or all
    until the peer closes the connection or stays silent for SILENT_S."""
    got = b""
    try:
        while not (line and (got.endswith(b"\n") or len(got) >= 64)):
            b = s.recv(1 if line else 65536)
            if not b:
                break
            got += b
    except (socket.timeout, OSError):
        pass
    return got


def _answer_bytes(s, payload):
    """Sends `payload` (as much as the peer takes) and returns how many bytes came back beyond the
    server's challenge (all of them where the first line is not a challenge)."""
    got = _recv(s, line=True)
    if CHALLENGE.fullmatch(got):
        got = b""
    try:
        s.sendall(payload)
    except OSError:
        pass  # the rank closed the connection: fine
    got += _recv(s)
    s.close()
    return len(got)


class Sniffer:
    """Captures the side channel's queries on the loopback interface: the TCP payloads starting
    with "Q\t" sent to one of `ports` (AF_PACKET: root only; `error` says why not)."""

    def __init__(self, ports):
        self.ports = set(ports)
        self.queries = []  # (port, payload)
        self.error = None
        self._stop = False
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
            self.sock.bind(("lo", 0x0800))
            self.sock.settimeout(0.2)
        except OSError as e:
            self.sock, self.error = None, f"no raw packet socket on lo ({e})"
            return
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                pkt, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] == socket.PACKET_OUTGOING or len(pkt) < 20 or pkt[9] != 6:  # each once; TCP
                continue
            ihl = (pkt[0] & 0xF) * 4
            dport = struct.unpack("!H", pkt[ihl + 2:ihl + 4])[0]
            payload = pkt[ihl + (pkt[ihl + 12] >> 4) * 4:]
            if dport in self.ports and payload.startswith(b"Q\t") and payload.endswith(b"\n"):
                self.queries.append((dport, payload))

    def stop(self):
        self._stop = True
        if self.sock:
            self.thread.join(2)
            self.sock.close()


def replay(sniffer, problems, log, most=4):
    """Replays up to `most` captured queries (full ones first: those walk the stack) to the port
    each was sent to, each on a new connection: nothing may come back beyond the challenge."""
    if sniffer.error:
        problems.append(f"replay: {sniffer.error}")
        return
    qs = sorted(set(sniffer.queries), key=lambda q: q[1].split(b"\t")[8] != b"0")
    if not qs:
        problems.append("replay: no query of the watchdog's was captured (nothing replayed)")
        return
    for port, payload in qs[:most]:
        n = _answer_bytes(_connect("127.0.0.1", port), payload)
        fields = payload.split(b"\t")
        log.append(f"replayed a captured query (from rank {fields[1].decode()} to rank {fields[2].decode()}, "
                   f"brief {fields[8].decode()}) to 127.0.0.1:{port}: {n} bytes back")
        if n:
            problems.append(f"a replayed query to port {port} got {n} bytes back")


class Attack:
    def __init__(self):
        self.problems = []
        self.held = []  # silent connections, open until close()
        self.log = []

    def summary(self):
        return "hostile clients:\n  " + "\n  ".join(self.log)

    def close(self):
        for s in self.held:
            s.close()


def attack_side_channels(rank_pids, advertised):
    """rank_pids[r]: the pid of rank r; advertised[r]: [(ip, port)] from rank r's INFO line.
    Every rank runs on this host: libhier may listen on loopback only."""
    a = Attack()
    for rank, pid in enumerate(rank_pids):
        all_ls = listeners(pid)
        adv = advertised.get(rank, [])
        ports = {p for _, p in adv}
        ls = [(ip, p) for ip, p in all_ls if p in ports]  # libhier's
        a.log.append(f"rank {rank} pid {pid} listens on {all_ls}; libhier advertised {adv}")
        if not ls:
            a.problems.append(f"rank {rank}: no libhier socket found (nothing tested)")
        for ip, port in ls:
            if (ip, port) not in adv:
                a.problems.append(f"rank {rank}: libhier listens on {ip}:{port}, not an advertised address")
                continue
            if ip != "127.0.0.1":
                a.problems.append(f"rank {rank}: libhier listens on {ip}:{port}, an interface the job does not "
                                  "use (every rank is on this host: loopback only)")
            a.held.append(_connect(ip, port))  # silent
            cases = {
                "1 MiB without a newline": b"Q" * (1 << 20),
                "invalid UTF-8": b"Q \xff\xfe\xc3\x28 \xed\xa0\x80 4\n",
                "plain query": b"Q 1 4\n",
                "query with a made-up MAC": (f"Q\t0\t{rank}\t{pid}\t{'0' * 32}\t{'0' * 32}\t1\t4\t0\t{'ab' * 32}\n").encode(),
            }
            for what, payload in cases.items():
                n = _answer_bytes(_connect(ip, port), payload)
                a.log.append(f"rank {rank} {ip}:{port} {what}: {n} bytes back")
                if n:
                    a.problems.append(f"rank {rank} answered {n} bytes to: {what}")
        if ls:
            ip, port = next(((i, p) for i, p in ls if i not in ("0.0.0.0", "v6")), ls[0])
            t0 = time.monotonic()
            opened = 0
            for _ in range(1000):
                try:
                    socket.create_connection((ip, port), timeout=2).close()
                    opened += 1
                except OSError:
                    pass
            a.log.append(f"rank {rank} {ip}:{port}: {opened} of 1000 connections opened and closed in "
                         f"{time.monotonic() - t0:.2f} s")
    return a
