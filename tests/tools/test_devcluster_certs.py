from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster.certs import SERVICE_IP, write_pki


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_pki_chain_and_identities(tmp_path: Path) -> None:
    pki = write_pki(tmp_path)
    ca, serving, admin = _load(pki.ca_cert), _load(pki.serving_cert), _load(pki.admin_cert)

    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for leaf in (serving, admin):
        leaf.verify_directly_issued_by(ca)

    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    ips = sans.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("127.0.0.1") in ips and ipaddress.ip_address(SERVICE_IP) in ips
    assert ExtendedKeyUsageOID.SERVER_AUTH in serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value

    # kube-apiserver maps CN to the user name and O to groups.
    assert admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    assert ExtendedKeyUsageOID.CLIENT_AUTH in admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


def test_private_keys_are_private_and_usable(tmp_path: Path) -> None:
    pki = write_pki(tmp_path)
    for key in (pki.ca_key, pki.serving_key, pki.admin_key, pki.sa_key):
        assert key.stat().st_mode & 0o077 == 0
    # Python's TLS stack (used by the readiness probes) accepts the pair as a client identity.
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    public = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes()).public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    assert b"BEGIN PUBLIC KEY" in pki.sa_pub.read_bytes()
