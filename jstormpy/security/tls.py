"""Per-topology TLS material: a CA that issues the Topology Master's, the workers' and the
CLI's certificates at submit, and the SSL contexts / gRPC credentials built from them.

Layout of a TLS directory (``run_dir/tls`` by default; keys mode 0600, directory 0700)::

    ca.pem                     the CA certificate every party trusts (trust store)
    tm.pem     tm.key          the Topology Master     (CN and SAN ``jstorm-tm``)
    worker.pem worker.key      every worker            (CN and SAN ``jstorm-worker``)
    cli.pem    cli.key         the CLI / launcher      (CN and SAN ``jstorm-cli``)

The role of a peer is the common name of its certificate: the TM allows state-changing
calls only from ``jstorm-cli`` and workers only trust a server presenting ``jstorm-tm``.
A corporate CA is used instead of the generated one by giving ``Config.tls_ca_cert`` and
``Config.tls_ca_key`` (an intermediate CA the launcher issues from), or a directory of
ready certificates in this layout with ``Config.tls_certs_dir`` (docs/security.md).
"""

from __future__ import annotations

import datetime
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jstormpy.api.errors import ConfigError

TLS_DIR_ENV = "JSTORM_TLS_DIR"
#: Role names: the CN (and DNS SAN) of each party's certificate.
ROLE_TM = "jstorm-tm"
ROLE_WORKER = "jstorm-worker"
ROLE_CLI = "jstorm-cli"
ROLES = {"tm": ROLE_TM, "worker": ROLE_WORKER, "cli": ROLE_CLI}
CERT_DAYS = 365


@dataclass(frozen=True)
class TlsFiles:
    """Paths of one party's TLS material."""

    ca: Path
    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(CA PEM, certificate PEM, key PEM)."""
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()


def files_for(tls_dir: str | os.PathLike[str], role: str) -> TlsFiles:
    """The files of ``role`` ("tm", "worker" or "cli") in ``tls_dir``; ConfigError naming
    the missing file if one is absent."""
    root = Path(tls_dir)
    files = TlsFiles(root / "ca.pem", root / f"{role}.pem", root / f"{role}.key")
    for path in (files.ca, files.cert, files.key):
        if not path.is_file():
            raise ConfigError(f"TLS file {path} is missing (TLS directory {root}, role "
                              f"{role!r}); set Config.tls=False only for trusted single-host "
                              "runs")
    return files


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _name(common_name: str):  # type: ignore[no-untyped-def]
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def preload_tls() -> None:
    """Import what issuing certificates needs (the ``cryptography`` package takes a few
    hundred ms to import): ``LocalCluster()`` calls it so that ``submit`` does not."""
    from cryptography import x509  # noqa: F401
    from cryptography.hazmat.backends.openssl import backend  # noqa: F401
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: F401
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: F401
    from cryptography.x509.oid import ExtendedKeyUsageOID  # noqa: F401


def _new_key():  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> bytes:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM,  # type: ignore[no-any-return]
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(topology: str, days: int = CERT_DAYS) -> tuple[bytes, bytes]:
    """A fresh self-signed CA for one topology: (certificate PEM, key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    key = _new_key()
    name = _name(f"jstorm CA {topology}"[:64])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue(ca_cert_pem: bytes, ca_key_pem: bytes, common_name: str,
          days: int = CERT_DAYS, not_before: datetime.datetime | None = None
          ) -> tuple[bytes, bytes]:
    """A certificate for ``common_name`` signed by the CA: (certificate PEM, key PEM).

    The CN is also the DNS subject-alternative name (clients check it as the host name),
    and the certificate is good for both TLS server and client authentication.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = _new_key()
    start = not_before or (_now() - datetime.timedelta(minutes=5))
    cert = (x509.CertificateBuilder().subject_name(_name(common_name))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def create_topology_tls(tls_dir: str | os.PathLike[str], topology: str,
                        ca_cert_file: str = "", ca_key_file: str = "") -> Path:
    """Write a TLS directory for one topology: the CA (generated, or the supplied
    ``ca_cert_file``/``ca_key_file``) and certificates for the TM, workers and CLI.

    The CA key is not kept in the directory: nothing later needs to issue certificates.
    """
    root = Path(tls_dir)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    if ca_cert_file or ca_key_file:
        if not (ca_cert_file and ca_key_file):
            raise ConfigError("Config.tls_ca_cert and Config.tls_ca_key go together "
                              "(the launcher issues certificates from that CA)")
        try:
            ca_pem = Path(ca_cert_file).read_bytes()
            ca_key = Path(ca_key_file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the supplied CA: {exc}") from None
    else:
        ca_pem, ca_key = new_ca(topology)
    (root / "ca.pem").write_bytes(ca_pem)
    for role, cn in ROLES.items():
        cert, key = issue(ca_pem, ca_key, cn)
        (root / f"{role}.pem").write_bytes(cert)
        _write_private(root / f"{role}.key", key)
    return root


def copy_certs_dir(source: str | os.PathLike[str], tls_dir: str | os.PathLike[str]) -> Path:
    """Copy a directory of ready certificates (``Config.tls_certs_dir``, same layout) into
    the run's TLS directory, checking every file is there."""
    root = Path(tls_dir)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for role in ROLES:
        files = files_for(source, role)
        (root / "ca.pem").write_bytes(files.ca.read_bytes())
        (root / f"{role}.pem").write_bytes(files.cert.read_bytes())
        _write_private(root / f"{role}.key", files.key.read_bytes())
    return root


def pack_role(tls_dir: str | os.PathLike[str], role: str) -> dict[str, str]:
    """One role's files as PEM strings (shipped with a Spark job, never on a command line)."""
    ca, cert, key = files_for(tls_dir, role).read()
    return {"ca.pem": ca.decode(), f"{role}.pem": cert.decode(), f"{role}.key": key.decode()}


def unpack_role(files: dict[str, str], tls_dir: str | os.PathLike[str]) -> Path:
    """Write files packed by :func:`pack_role` into ``tls_dir`` (0700; keys 0600)."""
    root = Path(tls_dir)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for name, text in files.items():
        if "/" in name or name.startswith("."):
            raise ConfigError(f"bad TLS file name {name!r}")
        if name.endswith(".key"):
            _write_private(root / name, text.encode())
        else:
            (root / name).write_text(text)
    return root


def tls_dir_from_env() -> str:
    """The TLS directory handed to a process in ``JSTORM_TLS_DIR`` ("" = TLS off)."""
    return os.environ.get(TLS_DIR_ENV, "")


# -- gRPC ---------------------------------------------------------------------------------------
def grpc_server_credentials(tls_dir: str | os.PathLike[str]):  # type: ignore[no-untyped-def]
    """Server credentials of the TM: its certificate, and client certificates required and
    verified against the topology CA (mutual TLS)."""
    import grpc

    ca, cert, key = files_for(tls_dir, "tm").read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=True)


def grpc_channel(address: str, tls_dir: str | os.PathLike[str] | None, role: str,
                 options: list[tuple[str, object]] | None = None):  # type: ignore[no-untyped-def]
    """A channel to the TM: mutual TLS as ``role`` checking that the server is the
    topology's TM (``jstorm-tm`` signed by the CA) when ``tls_dir`` is set, else plaintext."""
    import grpc

    opts = list(options or [])
    if not tls_dir:
        return grpc.insecure_channel(address, options=opts)
    ca, cert, key = files_for(tls_dir, role).read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert)
    opts.append(("grpc.ssl_target_name_override", ROLE_TM))
    return grpc.secure_channel(address, creds, options=opts)


class CallContext(Protocol):
    """What :func:`peer_role` needs of a gRPC ``ServicerContext``."""

    def auth_context(self) -> Any: ...


def peer_role(context: CallContext) -> str:
    """The verified common name of the peer of a gRPC call ("" if it has none)."""
    auth = context.auth_context()
    names = auth.get("x509_common_name") or []
    return names[0].decode() if names else ""


# -- data plane (worker <-> worker) -----------------------------------------------------------
def server_context(tls_dir: str | os.PathLike[str], role: str = "worker") -> ssl.SSLContext:
    """An SSL context for accepting connections: our certificate, client certificates
    required and verified against the topology CA."""
    files = files_for(tls_dir, role)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(cafile=str(files.ca))
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(tls_dir: str | os.PathLike[str], role: str = "worker") -> ssl.SSLContext:
    """An SSL context for connecting: our certificate, the server verified against the
    topology CA (host name = the role name, see :func:`server_hostname`)."""
    files = files_for(tls_dir, role)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert, files.key)
    ctx.load_verify_locations(cafile=str(files.ca))
    ctx.check_hostname = True
    return ctx
