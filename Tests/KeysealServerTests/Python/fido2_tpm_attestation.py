"""python-fido2's WebAuthn "tpm" attestation verifier on a statement made by `keyseal attest`.

challenge PUBKEY.pem          prints, in hex, the challenge to attest: authenticatorData (with the key as its
                              credential public key) followed by a clientDataHash
verify PUBKEY.pem STATEMENT CA.pem
                              verifies the statement for that challenge with fido2's TpmAttestation, then the x5c
                              chain up to CA.pem with fido2's verify_x509_chain; exit 0 when it holds, 1 otherwise
"""
import hashlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from fido2 import cbor
from fido2.attestation import TpmAttestation, verify_x509_chain
from fido2.cose import ES256
from fido2.webauthn import AttestedCredentialData, AuthenticatorData

CLIENT_DATA_HASH = hashlib.sha256(b"keyseal attestation test client data").digest()


def auth_data(public_key_path):
    with open(public_key_path, "rb") as f:
        public_key = serialization.load_pem_public_key(f.read())
    credential = AttestedCredentialData.create(
        b"\0" * 16, b"keyseal-key", ES256.from_cryptography_key(public_key)
    )
    return AuthenticatorData.create(
        hashlib.sha256(b"keyseal.example").digest(), AuthenticatorData.FLAG.UP | AuthenticatorData.FLAG.AT, 0, credential
    )


def main():
    mode = sys.argv[1]
    data = auth_data(sys.argv[2])
    if mode == "challenge":
        print((bytes(data) + CLIENT_DATA_HASH).hex())
        return 0
    with open(sys.argv[3], "rb") as f:
        statement = cbor.decode(f.read())
    with open(sys.argv[4], "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
    try:
        result = TpmAttestation().verify(statement, data, CLIENT_DATA_HASH)
        verify_x509_chain(list(result.trust_path) + [ca])
    except Exception as error:  # noqa: BLE001 - any failure is the answer
        print(f"fido2 refused the attestation: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"fido2 verified: {result.attestation_type.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
