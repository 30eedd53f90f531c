"""A BE job server for the parking tests: accepts one TCP connection on
127.0.0.1, reads "N\n", computes an N-step SHA-256 chain (CPU-bound, seconds)
and answers with its hex digest. Prints its port on stdout first."""

import hashlib
import socket
import sys


def chain(n):
    h = b"schedbe"
    for _ in range(n):
        h = hashlib.sha256(h).digest()
    return h.hex()


def main():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    print(srv.getsockname()[1], flush=True)
    conn, _ = srv.accept()
    n = int(conn.makefile().readline())
    conn.sendall((chain(n) + "\n").encode())
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
