"""A local RFC 3161 time-stamping authority for tests and the demo: OpenSSL's own
``openssl ts -reply`` behind a small standard-library HTTP handler, with a throwaway CA.

    python -m tools.tsa FOLDER [--port N]   # serves http://127.0.0.1:N/ until Ctrl-C

``LocalTsa(folder)`` makes the CA, the TSA certificate (extendedKeyUsage timeStamping,
critical) and OpenSSL's TSA configuration in ``folder`` (its answers carry both certificates);
``serve()`` starts the HTTP server on 127.0.0.1 in a thread and returns its URL. Nothing here
is a mock: every answer is a real TimeStampResp that OpenSSL signed.
"""

from __future__ import annotations

import argparse
import ssl
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final

MAX_QUERY_BYTES: Final = 64 * 1024
POLICY: Final = "1.3.6.1.4.1.55555.1.1"  # a private-arc policy id for the test TSA

_CONFIG: Final = """\
[ tsa ]
default_tsa = tsa_config1

[ tsa_config1 ]
dir = {dir}
serial = $dir/serial
crypto_device = builtin
signer_cert = $dir/tsa.pem
certs = $dir/ca.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = {policy}
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""

_TSA_EXTENSIONS: Final = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


# The answer carries the TSA's certificate and its root, so a token is checkable on its own, as
# the audit checks a recorded one (LEDGER.md section 7). OpenSSL writes the signer's certificate
# first, then the root; DER (and rfc3161-client, which refuses a token otherwise) wants that SET
# OF sorted by encoding. A longer root subject makes the root's encoding the longer one, so the
# order OpenSSL writes is the sorted one (checked when the certificates are made).
_CA_ORGANIZATION: Final = "ledger tests, throwaway test authority"
_CA_UNIT: Final = "not for any use outside the test suite and the demo"


def _check_set_order(first: Path, second: Path) -> None:
    ders = [ssl.PEM_cert_to_DER_cert(p.read_text()) for p in (first, second)]
    width = max(len(d) for d in ders)
    if ders[0].ljust(width, b"\0") >= ders[1].ljust(width, b"\0"):
        raise RuntimeError("the TSA certificate does not sort before its root (DER SET OF)")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


class LocalTsa:
    """A CA and a TSA certificate in ``folder``, and OpenSSL answering time-stamp queries."""

    def __init__(self, folder: Path, name: str = "Test TSA") -> None:
        # Absolute: OpenSSL runs in the folder and is given its configuration's path (a relative
        # folder, as `python -m tools.tsa tsa` names it, was looked for inside itself).
        self.folder = folder = folder.resolve()
        self.ca_pem = folder / "ca.pem"
        folder.mkdir(parents=True, exist_ok=True)
        if not self.ca_pem.exists():
            self._make_certificates(name)
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()  # OpenSSL's serial file: one reply at a time

    def _make_certificates(self, name: str) -> None:
        d = self.folder
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
        _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "3650",
                 "-subj", f"/O={_CA_ORGANIZATION}/OU={_CA_UNIT}/CN={name} Root CA",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)  # fmt: skip
        _openssl("req", *ec, "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", f"/CN={name}",
                 cwd=d)  # fmt: skip
        (d / "tsa.ext").write_text(_TSA_EXTENSIONS)
        _openssl("x509", "-req", "-in", "tsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", "tsa.pem", "-days", "3650", "-extfile", "tsa.ext",
                 cwd=d)  # fmt: skip
        _check_set_order(d / "tsa.pem", d / "ca.pem")
        (d / "serial").write_text("01\n")
        (d / "tsa.cnf").write_text(_CONFIG.format(dir=d.resolve(), policy=POLICY))

    def reply(self, query: bytes) -> bytes:
        """OpenSSL's TimeStampResp to a DER TimeStampReq."""
        with self._lock, tempfile.TemporaryDirectory() as scratch:
            tsq, tsr = Path(scratch) / "q.tsq", Path(scratch) / "r.tsr"
            tsq.write_bytes(query)
            _openssl("ts", "-reply", "-config", str(self.folder / "tsa.cnf"),
                     "-queryfile", str(tsq), "-out", str(tsr), cwd=self.folder)  # fmt: skip
            return tsr.read_bytes()

    def serve(self, port: int = 0) -> str:
        """Start answering on 127.0.0.1 (``port`` 0: a free one); the URL to POST to."""
        tsa = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_QUERY_BYTES:
                    self.send_error(413 if length else 400)
                    return
                try:
                    body = tsa.reply(self.rfile.read(length))
                except subprocess.CalledProcessError:
                    self.send_error(400, "not a time-stamp query")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # quiet: tests read their own output

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.tsa", description=__doc__)
    parser.add_argument("folder", type=Path, help="where the CA, keys and config live")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    tsa = LocalTsa(args.folder)
    print(f"TSA at {tsa.serve(args.port)} (CA certificate: {tsa.ca_pem})", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        tsa.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
