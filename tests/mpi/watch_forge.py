#!/usr/bin/env python3
"""What an outsider can do to a running job's ports (tests/mpi/watch_forged.sh).

  watch_forge.py listeners PID...   every TCP socket the processes listen on,
                                    one "PID ADDRESS PORT" line each (IPv4 and
                                    IPv6, from /proc: no ss needed)
  watch_forge.py send ADDRESS PORT  connects and sends the liveness watch's
                                    LOST message as a stranger would forge it:
                                    magic 0x7374726c and type 3, little-endian,
                                    the rest of 104 bytes zero; then, on a
                                    second connection, the same padded with
                                    zeros to 256 bytes (a whole message of any
                                    longer layout); prints what happened
  watch_forge.py selftest           checks the two above against a listener of
                                    its own
"""
import ipaddress
import os
import socket
import struct
import sys

MAGIC, LOST = 0x7374726C, 3
FORGED = struct.pack("<II", MAGIC, LOST) + bytes(96)
assert len(FORGED) == 104


def socket_inodes(pid):
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def decode(hexaddr, v6):
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hexaddr)
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.IPv6Address(raw) if v6 else ipaddress.IPv4Address(raw))


def listeners(pid):
    inodes = socket_inodes(pid)
    found = []
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = open(f"/proc/{pid}/net/{name}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, state, inode = f[1], f[3], f[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            addr, port = local.split(":")
            found.append((decode(addr, v6), int(port, 16)))
    return found


def send(addr, port, payload):
    """Sends payload on a fresh connection and waits a little for the
    other end: 'closed' (it closed), 'open' (it kept the connection),
    'refused' or 'reset' (no way in)."""
    if addr in ("0.0.0.0", "::"):  # every interface: loopback is one
        addr = "127.0.0.1" if addr == "0.0.0.0" else "::1"
    try:
        s = socket.create_connection((addr, port), timeout=2)
    except ConnectionRefusedError:
        return "refused"
    except OSError as e:
        return f"error {e}"
    try:
        s.sendall(payload)
        s.settimeout(0.3)
        return "closed" if s.recv(4096) == b"" else "answered"
    except socket.timeout:
        return "open"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    finally:
        s.close()


def selftest():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    assert ("127.0.0.1", port) in listeners(os.getpid()), listeners(os.getpid())
    assert send("127.0.0.1", port, FORGED) == "open"
    c, _ = srv.accept()
    assert c.recv(4096) == FORGED
    c.close()
    srv.close()
    print("selftest ok")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "listeners":
        for pid in sys.argv[2:]:
            for addr, port in listeners(pid):
                print(pid, addr, port)
    elif cmd == "send":
        addr, port = sys.argv[2], int(sys.argv[3])
        print("104 bytes:", send(addr, port, FORGED), "; 256 bytes:",
              send(addr, port, FORGED + bytes(256 - len(FORGED))))
    elif cmd == "selftest":
        selftest()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
