"""Hostile clients of the watchdog's side channel (run_hang.py hostile): what a stranger on the same
machine can try against a running job. Every rank's listening sockets are found through /proc (as
`ss -ltnp` would); then, against each of them:
  - a connection that stays silent (held open until the job ends);
  - 1 MiB without a newline;
  - a line of invalid UTF-8;
  - well-formed queries without the secret (the old plain format, and the new one with a made-up
    MAC, addressed to the right rank and pid);
  - 1,000 connections opened and closed.
libhier's sockets are told from the MPI library's own (Open MPI listens on 0.0.0.0 by itself) by
the addresses each rank logs at HIER_DEBUG=INFO ("side channel on IP:PORT ...").
Findings (`problems`): any byte sent back to any of these clients, a libhier socket on 0.0.0.0 or
on an address it does not advertise, a rank with no libhier socket found (nothing tested)."""
import os
import socket
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


def _answer_bytes(s, payload):
    """Sends `payload` (as much as the peer takes) and returns how many bytes came back."""
    got = 0
    try:
        s.sendall(payload)
    except OSError:
        pass  # the rank closed the connection: fine
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except (socket.timeout, OSError):
        pass
    s.close()
    return got


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
    """rank_pids[r]: the pid of rank r; advertised[r]: [(ip, port)] from rank r's INFO line."""
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
            a.held.append(_connect(ip, port))  # silent
            cases = {
                "1 MiB without a newline": b"Q" * (1 << 20),
                "invalid UTF-8": b"Q \xff\xfe\xc3\x28 \xed\xa0\x80 4\n",
                "plain query": b"Q 1 4\n",
                "query with a made-up MAC": (f"Q\t0\t{rank}\t{pid}\t{'0' * 32}\t1\t4\t0\t{'ab' * 32}\n").encode(),
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
