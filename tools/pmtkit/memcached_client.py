# SPDX-License-Identifier: BSD-3-Clause
"""memcached_client.py -- a small client for memcached's text protocol, one
request at a time but for get_many_pipelined (other callers that pipeline
write raw requests with send() and read the replies with line()).

Keys may be str or bytes; replies that carry keys are keyed by the objects
the caller passed.  A connection the server closes raises ConnectionError.
"""

import socket


def _bytes(s):
    return s.encode() if isinstance(s, str) else s


class MemcachedClient:
    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""  # received, not yet consumed

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("memcached closed the connection")
        self.buf += chunk

    def line(self):
        """The next reply line, without its \\r\\n, as bytes."""
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        """The next n bytes."""
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def command(self, text):
        """Sends one command line (str), returns the first reply line as str."""
        self.send(_bytes(text) + b"\r\n")
        return self.line().decode()

    def store(self, key, value, flags=0, exptime=0):
        """`set`; returns the reply ("STORED", "SERVER_ERROR ...")."""
        self.send(b"set %s %d %d %d\r\n%s\r\n" % (_bytes(key), flags, exptime, len(value), value))
        return self.line().decode()

    def _values(self, verb, keys):
        """{key: (flags, cas or None, value)} of the keys found."""
        wanted = {_bytes(k): k for k in keys}
        self.send(verb + b" " + b" ".join(wanted) + b"\r\n")
        return self._read_values(wanted)

    def _read_values(self, wanted):
        """The reply to one get of wanted ({bytes key: caller's key})."""
        found = {}
        while True:
            line = self.line()
            if line == b"END":
                return found
            f = line.split()
            if len(f) < 4 or f[0] != b"VALUE" or f[1] not in wanted:
                raise ConnectionError(f"unexpected reply {line[:80]!r}")
            data = self.exact(int(f[3]) + 2)[:-2]
            found[wanted[f[1]]] = (int(f[2]), int(f[4]) if len(f) > 4 else None, data)

    def get_many(self, keys):
        """{key: value} of the keys found."""
        return {k: v for k, (_, _, v) in self._values(b"get", keys).items()}

    def get_many_pipelined(self, key_lists, window=16):
        """{key: value} of the keys found, for each list of keys in turn (a
        generator), with up to window gets in flight: one reply's wait (a
        server holding output until it is durable) then covers many."""
        wanted = [{_bytes(k): k for k in keys} for keys in key_lists]
        sent = 0
        for n, w in enumerate(wanted):
            ahead = []
            while sent < len(wanted) and sent - n < window:
                ahead.append(b"get " + b" ".join(wanted[sent]) + b"\r\n")
                sent += 1
            if ahead:
                self.send(b"".join(ahead))
            yield {k: v for k, (_, _, v) in self._read_values(w).items()}

    def gets(self, keys):
        """{key: (flags, cas, value)} of the keys found."""
        return self._values(b"gets", keys)

    def ttl(self, key):
        """The remaining TTL (meta get), -1 for none, None when the key is absent."""
        reply = self.command("mg %s t" % (key.decode() if isinstance(key, bytes) else key))
        if not reply.startswith("HD"):
            return None
        for tok in reply.split()[1:]:
            if tok.startswith("t"):
                return int(tok[1:])
        return None

    def stats(self, sub=""):
        """`stats [sub]` as {name: value} (both str)."""
        self.send(("stats %s\r\n" % sub if sub else "stats\r\n").encode())
        st = {}
        while True:
            line = self.line()
            if line == b"END":
                return st
            f = line.decode(errors="replace").split(" ", 2)
            if len(f) == 3:
                st[f[1]] = f[2]
