"""The cluster's PKI, generated with `cryptography`: CA, serving cert, admin client cert, SA keys.

ECDSA P-256 everywhere: generation takes milliseconds (RSA-2048 takes ~100 ms a key) and
every component, including the service-account token signer (ES256), accepts it.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
# Clocks of the generating and the verifying process are the same here, but a small
# backdate avoids "not yet valid" on coarse timestamps.
BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class CertPaths:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # private: signs service-account tokens (apiserver) and legacy tokens (KCM)
    sa_pub: Path  # public: verifies them

    @classmethod
    def in_dir(cls, directory: Path) -> CertPaths:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            admin_cert=directory / "admin.crt",
            admin_key=directory / "admin.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
        )


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
    )


def make_ca(common_name: str = "sparkop-devcluster-ca") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=True,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def make_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    *,
    organization: str | None = None,
    server: bool = False,
    client: bool = False,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = new_key()
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = (
        _builder(_name(common_name, organization), ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_leaf_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


# The first IP of --service-cluster-ip-range: in-cluster clients reach the apiserver there.
SERVICE_IP = "10.0.0.1"


def write_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> CertPaths:
    """Generate a fresh PKI into `directory` (private keys mode 0600); the API server's
    certificate also names `extra_ips`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = CertPaths.in_dir(directory)
    ca_cert, ca_key = make_ca()
    serving_cert, serving_key = make_leaf(
        ca_cert,
        ca_key,
        "kube-apiserver",
        server=True,
        dns_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        ip_addresses=("127.0.0.1", SERVICE_IP, *extra_ips),
    )
    admin_cert, admin_key = make_leaf(ca_cert, ca_key, "admin", organization="system:masters", client=True)
    sa_key = new_key()
    files: dict[Path, bytes] = {
        paths.ca_cert: cert_pem(ca_cert),
        paths.ca_key: key_pem(ca_key),
        paths.serving_cert: cert_pem(serving_cert),
        paths.serving_key: key_pem(serving_key),
        paths.admin_cert: cert_pem(admin_cert),
        paths.admin_key: key_pem(admin_key),
        paths.sa_key: key_pem(sa_key),
        paths.sa_pub: public_key_pem(sa_key),
    }
    for path, data in files.items():
        path.write_bytes(data)
        if path.suffix == ".key":
            path.chmod(0o600)
    return paths


def write_serving_pair(
    pki: CertPaths, directory: Path, common_name: str, ip_addresses: tuple[str, ...] = ("127.0.0.1",)
) -> tuple[Path, Path]:
    """A serving certificate for a process on this machine (a webhook server the API server calls
    at https://127.0.0.1:<port>), signed by the cluster's CA: the caBundle that registers it is
    the cluster's ca.crt. Written as ``tls.crt`` and ``tls.key``, the names controller-runtime's
    servers read from their certificate directory."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: not the ECDSA key write_pki makes")
    cert, key = make_leaf(
        ca_cert, ca_key, common_name, server=True, dns_names=("localhost",), ip_addresses=ip_addresses
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert_pem(cert))
    key_path.write_bytes(key_pem(key))
    key_path.chmod(0o600)
    return cert_path, key_path
